{{- define "ct-auditor.name" -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "ct-auditor.labels" -}}
app.kubernetes.io/part-of: ct-auditor
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- define "ct-auditor.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}

{{/* Base URL of group i: <scheme>://<host><groupPathPrefix>/{i}. */}}
{{- define "ct-auditor.urlTemplate" -}}
{{ .Values.publicScheme }}://{{ .Values.publicHost }}{{ .Values.groupPathPrefix }}/{i}
{{- end -}}

{{/* The pod security settings every pod shares. */}}
{{- define "ct-auditor.podSecurity" -}}
enableServiceLinks: false
automountServiceAccountToken: false
securityContext:
  runAsNonRoot: true
  runAsUser: 10001 # the image's user `ctaudit` (Dockerfile)
  runAsGroup: 10001
  fsGroup: 10001
  fsGroupChangePolicy: OnRootMismatch
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{- define "ct-auditor.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: ["ALL"]
{{- end -}}

{{/* Checks of the values that the schema cannot make. */}}
{{- define "ct-auditor.check" -}}
{{- if and (lt (int .Values.replicasPerGroup) 2) (not .Values.allowSingleReplica) -}}
{{- fail "replicasPerGroup must be at least 2 (every database answerable while a pod is down); set allowSingleReplica: true to run 1" -}}
{{- end -}}
{{- if not (regexMatch "^(/[A-Za-z0-9._~-]+)+$" .Values.groupPathPrefix) -}}
{{- fail "groupPathPrefix must be plain path segments like /g" -}}
{{- end -}}
{{- end -}}
