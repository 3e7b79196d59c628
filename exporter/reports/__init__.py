"""Every form a check's result is written in: compiler-style text and JSON, SARIF 2.1.0,
GitHub workflow commands, the JSON the worker hands to its clients, and the files a user asked
for (written whole or not at all)."""
