//! Record batch v2: placeholder, filled in by the protocol work (issue 2).
