//! kbench-client
