// PushStore: the registration store, with the outcomes, scheduled sends and rich payloads kept
// beside it: one SQL implementation over SQLite and PostgreSQL, and its migrations.
