//! End-to-end tests against real `mcpgate` processes on loopback.

mod process;
