{{/*
The sizing formula (docs/deploy-kubernetes.md#sizing; the model is
auditor-server/src/memory.rs and docs/operator.md#sizing), from
.Values.entries, groups, nodeMemory, cpu and epoch. Returns JSON (every
number an integer):

  filterBits   k · capacity(N), capacity = N rounded up to a multiple of 8
  databases    ⌈a / per⌉ with per = clamp(dbBitsTarget / filterBits, 1, a)
               (auditor-server's layout::plan_dbs); the largest holds
               ⌈a / databases⌉ filters
  ell1, ell2   DbShape::for_bits of the largest database (8-bit records):
               ell1 = 2^⌈log2(records)/2⌉, ell2 = ⌈records / ell1⌉
  perDbBytes   records + YPIR state, 100 MB + 7.9 KB × ell2 (the fit of
               docs/deploy-kubernetes.md#sizing to Server::memory)
  dbsPerGroup  ⌈databases / groups⌉
  servingBytes dbsPerGroup × perDbBytes (one epoch)
  answerMicros one query on one core: 13.1 ms + 82.2 ms per GiB of database
               (docs/scale.md, measured), × 0.23 in batches of 8
  maxConcurrentQueries  cpu × queueSeconds ÷ that (at least 16): the answer
               work a pod queues before it sheds load (503 overloaded);
               maxConnections = that + 256
  memoryBytes  a group pod, which downloads and serves, never builds:
               2 × servingBytes (the next epoch loaded while the current
               one serves; the previous answerable for grace_seconds)
               + perDbBytes (one database's files read back while loading)
               + 1.5 MB × (slots + connections) (query bodies in flight)
               + 512 MiB (process, buffers)
  builderMemoryBytes  a builder (one Indexed Job index), whose memory does
               not grow with N: servingBytes (its group's bitmaps, then
               its databases as they are set up) + perDbBytes (one
               database's setup transients) + 40 MiB per filling thread
               (builder.cpu; fill.rs) + 512 MiB (the snapshot's chunks in
               flight, process)
  builderDiskBytes  one epoch of the group's files: dbsPerGroup × (records
               + 3,824 B × ell2) × 1.1 + 1 GiB
  diskBytes    (keep + 1) × dbsPerGroup × (records + 3,824 B × ell2) × 1.1
  coordinatorMemoryBytes  1 GiB whatever N: `epoch prepare` sorts the
               snapshot on local disk in runs of 64 MiB (epoch/sorted.rs)
               and samples the fill ratio in 128 MiB of windows
  coordinatorDiskBytes    64 B × N × 1.1 + 1 GiB (the spill files and the
               sorted file, 32 B × N each at the most)
*/}}
{{- define "ct-auditor.bytes" -}}
{{- $q := toString . -}}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "K" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 -}}
{{- $out := 0 -}}
{{- $matched := false -}}
{{- range $u := list "Ki" "Mi" "Gi" "Ti" "K" "M" "G" "T" -}}
{{- if and (not $matched) (hasSuffix $u $q) -}}
{{- $out = mul (int64 (trimSuffix $u $q)) (get $units $u) -}}
{{- $matched = true -}}
{{- end -}}
{{- end -}}
{{- if not $matched }}{{ $out = int64 $q }}{{ end -}}
{{- $out -}}
{{- end -}}

{{- define "ct-auditor.sizing" -}}
{{- $v := .Values -}}
{{- $n := int64 $v.entries -}}
{{- if lt $n 1 }}{{ fail "entries must be at least 1" }}{{ end -}}
{{- $g := int64 $v.groups -}}
{{- if lt $g 1 }}{{ fail "groups must be at least 1" }}{{ end -}}
{{- $a := int64 $v.epoch.filters -}}
{{- $filterBits := mul (div (add $n 7) 8) 8 (int64 $v.epoch.bitsPerEntry) -}}
{{- $per := div (int64 $v.epoch.dbBitsTarget) $filterBits -}}
{{- if lt $per 1 }}{{ $per = 1 }}{{ end -}}
{{- if gt $per $a }}{{ $per = $a }}{{ end -}}
{{- $dbs := div (add $a $per -1) $per -}}
{{- $fmax := div (add $a $dbs -1) $dbs -}}
{{- $records := div (add (mul $fmax $filterBits) 7) 8 -}}
{{- $log := 0 -}}
{{- $p := 1 -}}
{{- range until 64 -}}
{{- if lt $p $records }}{{ $p = mul $p 2 }}{{ $log = add $log 1 }}{{ end -}}
{{- end -}}
{{- $ell1 := 1 -}}
{{- range until (int (div (add $log 1) 2)) }}{{ $ell1 = mul $ell1 2 }}{{ end -}}
{{- $ell2 := div (add $records $ell1 -1) $ell1 -}}
{{- $dbBytes := mul $ell1 $ell2 -}}
{{- $perDb := add $dbBytes 100000000 (mul 7900 $ell2) -}}
{{- $dbsPerGroup := div (add $dbs $g -1) $g -}}
{{- $serving := mul $dbsPerGroup $perDb -}}
{{- $answerMicros := div (mul (add 13100 (div (mul 82200 $dbBytes) 1073741824)) 23) 100 -}}
{{- $slots := div (mul (int64 $v.cpu) (int64 $v.queueSeconds) 1000000) $answerMicros -}}
{{- if lt $slots 16 }}{{ $slots = 16 }}{{ end -}}
{{- $conns := add $slots 256 -}}
{{- $memory := add (mul 2 $serving) $perDb (mul 1500000 (add $slots $conns)) 536870912 -}}
{{- $builderMemory := add $serving $perDb (mul 41943040 (int64 $v.builder.cpu)) 536870912 -}}
{{- $builderDisk := add (div (mul $dbsPerGroup (add $dbBytes (mul 3824 $ell2)) 11) 10) 1073741824 -}}
{{- $disk := div (mul (add (int64 $v.epoch.keep) 1) $dbsPerGroup (add $dbBytes (mul 3824 $ell2)) 11) 10 -}}
{{- $node := int64 (include "ct-auditor.bytes" $v.nodeMemory) -}}
{{- $usable := int64 (floor (mulf (float64 $node) (float64 $v.nodeAllocatableFraction))) -}}
{{- if gt $memory $usable -}}
{{- $fixed := sub $memory (mul 2 $serving) -}}
{{- $fit := 0 -}}
{{- if gt $usable $fixed }}{{ $fit = div (sub $usable $fixed) (mul 2 $perDb) }}{{ end -}}
{{- if lt $fit 1 -}}
{{- fail (printf "a group pod needs %d GiB but a node of %s holds %d GiB usable: not even one database (%d GiB with its state, twice) fits; use larger nodes" (div $memory 1073741824) (toString $v.nodeMemory) (div $usable 1073741824) (div $perDb 1073741824)) -}}
{{- end -}}
{{- fail (printf "a group pod needs %d GiB (%d databases of %d) but a node of %s holds %d GiB usable: use at least %d groups (%d databases each), or larger nodes" (div $memory 1073741824) $dbsPerGroup $dbs (toString $v.nodeMemory) (div $usable 1073741824) (div (add $dbs $fit -1) $fit) $fit) -}}
{{- end -}}
{{- if gt $builderMemory $usable -}}
{{- fail (printf "a builder needs %d GiB but a node of %s holds %d GiB usable: use more groups or fewer builder.cpu" (div $builderMemory 1073741824) (toString $v.nodeMemory) (div $usable 1073741824)) -}}
{{- end -}}
{{- toJson (dict "filterBits" $filterBits "databases" $dbs "ell1" $ell1 "ell2" $ell2 "perDbBytes" $perDb "dbsPerGroup" $dbsPerGroup "servingBytes" $serving "answerMicros" $answerMicros "maxConcurrentQueries" $slots "maxConnections" $conns "memoryBytes" $memory "memoryMi" (div (add $memory 1048575) 1048576) "diskGi" (div (add $disk 1073741823) 1073741824) "coordinatorMemoryMi" 1024 "coordinatorDiskGi" (add (div (add (div (mul 64 $n 11) 10) 1073741823) 1073741824) 1) "maxMemoryBytes" $usable "builderMemoryBytes" $builderMemory "builderMemoryMi" (div (add $builderMemory 1048575) 1048576) "builderDiskGi" (div (add $builderDisk 1073741823) 1073741824)) -}}
{{- end -}}
