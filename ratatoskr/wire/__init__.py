"""The Bifrost wire as ratatoskr serves it. Nothing in this package touches SQLite."""
