//! kbench-bench
