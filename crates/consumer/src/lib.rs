//! The Strom consumer (work in progress).
