//! Rebuild when the embedded SQL migrations change (`sqlx::migrate!` in
//! `src/lib.rs` reads `migrations/{sqlite,postgres}` at compile time).
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
