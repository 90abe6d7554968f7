//! The read path: what untrusted SQL may touch ([`sandbox`]).

pub mod sandbox;
