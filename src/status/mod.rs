//! Status written back to Git.

pub mod publish;
