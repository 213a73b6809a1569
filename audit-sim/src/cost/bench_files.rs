//! Reading `pir-bench --json` files: the answer times an operator names
//! instead of (or beside) measuring here.

use std::path::{Path, PathBuf};

use super::fit::FitPoint;
use crate::error::{Error, Result};

/// Largest pir-bench JSON file [`load_pir_bench_points`] reads.
const MAX_BENCH_FILE_BYTES: u64 = 4 << 20;

/// Reads `pir-bench --json` output: each file holds one JSON object, several
/// (one per line or concatenated), or an array of them. Keeps the runs with
/// `threads == 1` and `batch == 1` (the fit is per query per core) and uses
/// `db_bytes` and `answer_ms_median`; runs reporting `all_correct: false`
/// are skipped with a warning. Files above 4 MiB, malformed JSON and
/// missing or non-positive fields are errors.
pub fn load_pir_bench_points(json_files: &[PathBuf]) -> Result<Vec<FitPoint>> {
    let mut out = Vec::new();
    for path in json_files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        for item in &read_bench_objects(path)? {
            if let Some(p) = bench_point(item, &name)
                .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?
            {
                out.push(p);
            }
        }
    }
    Ok(out)
}

/// The `pir-bench --json` objects in one file: one object, several (one per
/// line or concatenated), or an array of them. Files above 4 MiB,
/// malformed JSON and a file with no object are errors.
pub(crate) fn read_bench_objects(path: &Path) -> Result<Vec<serde_json::Value>> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut text = String::new();
    file.take(MAX_BENCH_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| Error::io(path, e))?;
    if text.len() as u64 > MAX_BENCH_FILE_BYTES {
        return Err(Error::Invalid(format!(
            "{}: larger than {MAX_BENCH_FILE_BYTES} bytes, not a pir-bench result",
            path.display()
        )));
    }
    let mut out = Vec::new();
    for value in serde_json::Deserializer::from_str(&text).into_iter::<serde_json::Value>() {
        let value = value
            .map_err(|e| Error::Invalid(format!("{}: not pir-bench JSON: {e}", path.display())))?;
        match value {
            serde_json::Value::Array(items) => out.extend(items),
            v => out.push(v),
        }
    }
    if out.is_empty() {
        return Err(Error::Invalid(format!(
            "{}: no pir-bench result in the file",
            path.display()
        )));
    }
    Ok(out)
}

/// One pir-bench object → a point, `None` if it is not a single-thread,
/// single-query run. Errors are plain messages (the caller adds the path).
fn bench_point(v: &serde_json::Value, name: &str) -> std::result::Result<Option<FitPoint>, String> {
    let obj = v
        .as_object()
        .ok_or_else(|| "expected a JSON object per pir-bench run".to_owned())?;
    let uint = |field: &str| -> std::result::Result<u64, String> {
        obj.get(field)
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| format!("field {field:?} missing or not a non-negative integer"))
    };
    let (threads, batch) = (uint("threads")?, uint("batch")?);
    if threads != 1 || batch != 1 {
        return Ok(None);
    }
    let db_bytes = uint("db_bytes")?;
    let ms = obj
        .get("answer_ms_median")
        .and_then(serde_json::Value::as_f64)
        .ok_or_else(|| "field \"answer_ms_median\" missing or not a number".to_owned())?;
    if db_bytes == 0 || !(ms.is_finite() && ms > 0.0) {
        return Err(format!(
            "db_bytes = {db_bytes}, answer_ms_median = {ms}: both must be positive"
        ));
    }
    if obj.get("all_correct").and_then(serde_json::Value::as_bool) == Some(false) {
        tracing::warn!(
            file = name,
            db_bytes,
            "pir-bench run reported wrong answers; skipped"
        );
        return Ok(None);
    }
    let mut source = format!("{name} (pir-bench");
    if let Some(b) = obj.get("db_bits").and_then(serde_json::Value::as_u64) {
        source.push_str(&format!(", 2^{b} bits"));
    }
    if let Some(t) = obj.get("trials").and_then(serde_json::Value::as_u64) {
        source.push_str(&format!(", median of {t}"));
    }
    if let Some(k) = obj.get("kernel").and_then(serde_json::Value::as_str) {
        source.push_str(&format!(", {k}"));
    }
    source.push(')');
    Ok(Some(FitPoint {
        db_bytes: db_bytes as f64,
        seconds: ms / 1e3,
        source,
        setup_seconds: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_pir_bench_json() {
        let dir = tempfile::tempdir().unwrap();
        let one = dir.path().join("b33.json");
        std::fs::write(
            &one,
            r#"{"all_correct":true,"answer_ms_median":52.595836,"answer_ms_min":52.386784,"batch":1,"db_bits":33,"db_bytes":1073741824,"kernel":"avx512-vnni","threads":1,"trials":5,"update":null}"#,
        )
        .unwrap();
        let many = dir.path().join("many.jsonl");
        std::fs::write(
            &many,
            concat!(
                r#"{"answer_ms_median":14.5,"batch":1,"db_bytes":134217728,"threads":1}"#,
                "\n",
                r#"{"answer_ms_median":127.4,"batch":4,"db_bytes":1073741824,"threads":1}"#,
                "\n",
                r#"{"answer_ms_median":67.5,"batch":1,"db_bytes":2147483648,"threads":2}"#,
                "\n",
                r#"{"answer_ms_median":9.0,"batch":1,"db_bytes":1000,"threads":1,"all_correct":false}"#,
                "\n",
                r#"[{"answer_ms_median":87.6,"batch":1,"db_bytes":2147483648,"threads":1}]"#,
            ),
        )
        .unwrap();
        let pts = load_pir_bench_points(&[one.clone(), many.clone()]).unwrap();
        assert_eq!(pts.len(), 3, "{pts:?}");
        assert_eq!(pts[0].db_bytes, 1073741824.0);
        assert!((pts[0].seconds - 0.052595836).abs() < 1e-12);
        assert!(pts[0].source.contains("b33.json") && pts[0].source.contains("2^33"));
        assert_eq!(pts[1].db_bytes, 134217728.0);
        assert_eq!(pts[2].db_bytes, 2147483648.0);

        // Typed errors, no panics.
        let bad = dir.path().join("bad.json");
        for text in [
            "not json",
            "",
            r#"{"batch":1,"threads":1,"db_bytes":5}"#,
            r#"{"batch":1,"threads":1,"db_bytes":0,"answer_ms_median":1}"#,
            r#"{"batch":"1","threads":1}"#,
            "[1, 2]",
        ] {
            std::fs::write(&bad, text).unwrap();
            assert!(
                matches!(
                    load_pir_bench_points(std::slice::from_ref(&bad)),
                    Err(Error::Invalid(_))
                ),
                "{text}"
            );
        }
        let missing = dir.path().join("missing.json");
        assert!(matches!(
            load_pir_bench_points(&[missing]),
            Err(Error::Io { .. })
        ));
        let big = dir.path().join("big.json");
        std::fs::write(&big, vec![b' '; (MAX_BENCH_FILE_BYTES + 10) as usize]).unwrap();
        assert!(matches!(
            load_pir_bench_points(&[big]),
            Err(Error::Invalid(_))
        ));
    }
}
