//! The fake auditors of the client-side tests (browser-client, audit-sim):
//! the parts every one of them needs.

use audit_proto::filter::FilterSpec;
use audit_proto::manifest::{DbLayout, Manifest, ManifestParts, PirSpec};
use pir_core::db::BitDatabase;
use pir_core::params::{DbShape, TABLE1};

/// A valid manifest (YPIR Table 1 parameters) of epoch `epoch`, created
/// and snapshotted at `created_at`, with one filter of 2^16 bits (salt seed
/// `[7; 32]`) in one database (PIR seed `[9; 32]`) and `entries` entries.
pub fn tiny_manifest(epoch: u64, created_at: i64, entries: u64) -> Manifest {
    tiny_sharded_manifest(epoch, created_at, entries, 1, Vec::new())
}

/// [`tiny_manifest`] with `dbs` filters of 2^16 bits, one per database,
/// served by the shards at `urls` by the rule `db mod urls.len()`
/// (unsharded when `urls` is empty).
pub fn tiny_sharded_manifest(
    epoch: u64,
    created_at: i64,
    entries: u64,
    dbs: u32,
    urls: Vec<String>,
) -> Manifest {
    let filter = FilterSpec::new(dbs, 8, 8192, [7; 32]).expect("a valid filter");
    let shape = DbShape::for_bits(filter.bits, BitDatabase::RECORD_BITS);
    let db = DbLayout {
        filters: 1,
        rows: shape.ell1 as u64,
        cols: shape.ell2 as u64,
        query_bytes: pir_core::wire::query_len(&TABLE1, shape) as u64,
        response_bytes: pir_core::wire::response_len(&TABLE1) as u64,
    };
    let layout = vec![db; dbs as usize];
    let pir = PirSpec {
        scheme: "ypir".into(),
        param_set: TABLE1.id,
        param_name: TABLE1.name.into(),
        wire_version: pir_core::wire::VERSION,
        seed: [9; 32],
    };
    Manifest::new(ManifestParts {
        epoch,
        created_at,
        snapshot_at: created_at,
        entries,
        logs: vec![],
        filter,
        pir,
        layout: &layout,
        shards: (!urls.is_empty()).then(|| audit_proto::ShardMap::modulo(urls)),
    })
    .expect("a valid manifest")
}

/// Serves `app` on 127.0.0.1 (a free port) in a background task; returns
/// its base URL, `http://127.0.0.1:<port>`.
pub async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let url = format!("http://{}", listener.local_addr().expect("local address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_tiny_manifest_round_trips_and_is_served() {
        let m = tiny_manifest(3, 1_700_000_000, 10);
        assert_eq!(Manifest::from_json(&m.to_json()).unwrap(), m);
        assert_eq!((m.epoch, m.dbs.len(), m.filter.bits), (3, 1, 1 << 16));
        let url =
            serve(axum::Router::new().route("/", axum::routing::get(|| async { "ok" }))).await;
        let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        assert!(
            out.starts_with("HTTP/1.1 200") && out.ends_with("ok"),
            "{out}"
        );
    }
}
