//! Conversions between the database's values (signed 64-bit integers,
//! byte strings) and the store's types; a value this code cannot have
//! written is [`StoreError::Corrupt`].

use crate::error::StoreError;

pub(crate) fn hash32(bytes: &[u8]) -> Result<[u8; 32], StoreError> {
    <[u8; 32]>::try_from(bytes)
        .map_err(|_| StoreError::Corrupt(format!("expected 32 bytes, found {}", bytes.len())))
}

pub(crate) fn from_i64(what: &str, value: i64) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt(format!("negative {what}: {value}")))
}

pub(crate) fn to_i64(what: &'static str, value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::OutOfRange { what, value })
}
