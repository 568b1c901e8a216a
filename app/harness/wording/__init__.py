"""torch 2.13's own words: device-mismatch texts, other error texts, their generator."""
