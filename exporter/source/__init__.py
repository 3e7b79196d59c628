"""The user's source: which files a check reads, the export targets in them (found without
running anything), their text, inline suppressions, and stack traces mapped back to lines."""
