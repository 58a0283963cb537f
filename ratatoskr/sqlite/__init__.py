"""SQLite pieces shared by both planes: opening, pragmas, migrations, idempotency, cursors."""
