//! One module per subcommand: its flags, flags → spec, the library call, and the printing. Each
//! imports the leaf helpers (`args`, `signals`, `embedded`) and the library, never `cli` or each
//! other (but `suite`, which runs `codec` and `sweep` as steps).

pub mod broker;
pub mod codec;
pub mod compare;
pub mod consume;
pub mod e2e;
pub mod e2e_latency;
pub mod history;
pub mod omb;
pub mod produce;
pub mod suite;
pub mod sweep;
