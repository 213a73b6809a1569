//! Rebuild when the embedded SQL migrations change (`sqlx::migrate!` in
//! `src/store.rs` reads `../migrations/{sqlite,postgres}` at compile time).
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
