//! Dev-only support for the workspace's tests: one copy of each fixture
//! that several crates' tests share. Its own tests are the workspace's
//! checks on itself (the module graph of every crate, the docs' citations).
//! No crate depends on it outside `[dev-dependencies]`.
