//! The store's schema version, checked read-only against the migrations
//! this build embeds.
//!
//! Applying migrations is DDL, the owner role's job (`ct-ingest migrate`,
//! [`Store::connect_and_migrate`](crate::Store::connect_and_migrate)).
//! Everyone else ([`Store::connect`](crate::Store::connect)) only reads
//! sqlx's bookkeeping table `_sqlx_migrations` and refuses a schema that is
//! missing, behind, ahead of this build, or not the one this build would
//! have made.

use sqlx::migrate::Migrator;

use crate::error::StoreError;

/// The PostgreSQL schema that holds the store's tables. Every connection
/// sets `search_path` to it alone, so that statements name the store's
/// tables whatever schemas the connecting role owns (a schema named after
/// the role comes first on PostgreSQL's default search path, and would
/// otherwise shadow the store).
pub const PG_SCHEMA: &str = "public";

/// One row of `_sqlx_migrations`: version, success, checksum.
pub(crate) type Applied = (i64, bool, Vec<u8>);

/// Compares what the database applied with what `migrator` holds.
pub(crate) fn check(applied: &[Applied], migrator: &Migrator) -> Result<(), StoreError> {
    let known: Vec<_> = migrator
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
        .collect();
    let needed = known.last().map_or(0, |m| m.version);
    let found = applied.iter().map(|a| a.0).max().unwrap_or(0);
    if applied.is_empty() {
        return Err(StoreError::SchemaMissing);
    }
    if let Some((v, _, _)) = applied.iter().find(|a| !a.1) {
        return Err(StoreError::SchemaMismatch(format!(
            "migration {v} failed part-way; repair it, then run `ct-ingest migrate` again"
        )));
    }
    if found > needed {
        return Err(StoreError::SchemaNewer {
            found,
            known: needed,
        });
    }
    for (version, _, checksum) in applied {
        match known.iter().find(|m| m.version == *version) {
            Some(m) if *m.checksum == checksum[..] => {}
            Some(_) => {
                return Err(StoreError::SchemaMismatch(format!(
                    "migration {version} as applied differs from this build's"
                )))
            }
            None => {
                return Err(StoreError::SchemaMismatch(format!(
                    "migration {version} is unknown to this build"
                )))
            }
        }
    }
    if let Some(m) = known
        .iter()
        .find(|m| !applied.iter().any(|a| a.0 == m.version))
    {
        return Err(StoreError::SchemaOutdated {
            found,
            needed: m.version.max(needed),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    static M: Migrator = sqlx::migrate!("migrations/sqlite");

    fn applied(upto: i64) -> Vec<Applied> {
        M.iter()
            .filter(|m| m.version <= upto)
            .map(|m| (m.version, true, m.checksum.to_vec()))
            .collect()
    }

    #[test]
    fn versions() {
        let last = M.iter().map(|m| m.version).max().unwrap();
        assert!(check(&applied(last), &M).is_ok());
        assert!(matches!(check(&[], &M), Err(StoreError::SchemaMissing)));
        assert!(matches!(
            check(&applied(last - 1), &M),
            Err(StoreError::SchemaOutdated { found, needed }) if found == last - 1 && needed == last
        ));
        let mut ahead = applied(last);
        ahead.push((last + 1, true, vec![1]));
        assert!(matches!(
            check(&ahead, &M),
            Err(StoreError::SchemaNewer { found, known }) if found == last + 1 && known == last
        ));
        let mut changed = applied(last);
        changed[0].2 = vec![0; 48];
        let e = check(&changed, &M).unwrap_err();
        assert!(e.to_string().contains("differs"), "{e}");
        let mut failed = applied(last);
        failed[1].1 = false;
        let e = check(&failed, &M).unwrap_err();
        assert!(e.to_string().contains("failed part-way"), "{e}");
    }
}
