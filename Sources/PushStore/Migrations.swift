import Foundation

/// The schema, as numbered steps run once each at start-up, in order.
public enum Migrations {
    /// The newest schema version.
    public static var latest: Int { steps(.sqlite).last!.version }

    static func steps(_ dialect: SQLDialect) -> [(version: Int, statements: [String])] {
        let serialType =
            switch dialect {
            case .sqlite: "INTEGER PRIMARY KEY AUTOINCREMENT"
            case .postgres: "BIGSERIAL PRIMARY KEY"
            }
        let serial = "seq \(serialType)"
        return [
            (
                1,
                [
                    """
                    CREATE TABLE registrations (
                        \(serial),
                        hub TEXT NOT NULL,
                        registration_id TEXT NOT NULL,
                        format TEXT NOT NULL,
                        handle TEXT NOT NULL,
                        p256dh TEXT,
                        auth TEXT,
                        tags TEXT NOT NULL,
                        template_name TEXT,
                        template_body TEXT,
                        template_headers TEXT,
                        template_expiry TEXT,
                        installation_id TEXT,
                        user_id TEXT,
                        expires_at BIGINT,
                        version BIGINT NOT NULL,
                        updated_at BIGINT NOT NULL
                    )
                    """,
                    "CREATE UNIQUE INDEX registrations_by_id ON registrations (hub, registration_id)",
                    "CREATE INDEX registrations_by_hub ON registrations (hub, seq)",
                    "CREATE INDEX registrations_by_handle ON registrations (hub, handle)",
                    "CREATE INDEX registrations_by_installation ON registrations (hub, installation_id)",
                    "CREATE INDEX registrations_by_user ON registrations (hub, user_id)",
                    """
                    CREATE TABLE registration_tags (
                        hub TEXT NOT NULL,
                        tag TEXT NOT NULL,
                        seq BIGINT NOT NULL REFERENCES registrations (seq) ON DELETE CASCADE,
                        PRIMARY KEY (hub, tag, seq)
                    )
                    """,
                    "CREATE INDEX registration_tags_by_registration ON registration_tags (seq)",
                    """
                    CREATE TABLE installations (
                        hub TEXT NOT NULL,
                        installation_id TEXT NOT NULL,
                        document TEXT NOT NULL,
                        updated_at BIGINT NOT NULL,
                        PRIMARY KEY (hub, installation_id)
                    )
                    """,
                    """
                    CREATE TABLE registration_ids (
                        hub TEXT NOT NULL,
                        registration_id TEXT NOT NULL,
                        issued_at BIGINT NOT NULL,
                        PRIMARY KEY (hub, registration_id)
                    )
                    """,
                    """
                    CREATE TABLE users (
                        name TEXT PRIMARY KEY,
                        password_hash TEXT NOT NULL,
                        created_at BIGINT NOT NULL
                    )
                    """,
                ]
            ),
            (
                2,
                [
                    """
                    CREATE TABLE notifications (
                        notification_id TEXT PRIMARY KEY,
                        hub TEXT NOT NULL,
                        state TEXT NOT NULL,
                        enqueued_at BIGINT NOT NULL,
                        started_at BIGINT,
                        ended_at BIGINT,
                        expected BIGINT,
                        received BIGINT NOT NULL,
                        expired BIGINT NOT NULL,
                        rejected BIGINT NOT NULL
                    )
                    """,
                    """
                    CREATE TABLE notification_counts (
                        notification_id TEXT NOT NULL,
                        platform TEXT NOT NULL,
                        outcome TEXT NOT NULL,
                        count BIGINT NOT NULL,
                        PRIMARY KEY (notification_id, platform, outcome)
                    )
                    """,
                    """
                    CREATE TABLE result_receipts (
                        notification_id TEXT NOT NULL,
                        receipt TEXT NOT NULL,
                        PRIMARY KEY (notification_id, receipt)
                    )
                    """,
                ]
            ),
            (
                3,
                [
                    """
                    CREATE TABLE rich_payloads (
                        id \(serialType),
                        hub TEXT NOT NULL,
                        sender TEXT NOT NULL,
                        recipient TEXT NOT NULL,
                        content_type TEXT NOT NULL,
                        rich_type TEXT NOT NULL,
                        message TEXT NOT NULL,
                        payload TEXT NOT NULL,
                        created_at BIGINT NOT NULL
                    )
                    """
                ]
            ),
            (
                4,
                [
                    """
                    CREATE TABLE scheduled_notifications (
                        notification_id TEXT PRIMARY KEY,
                        hub TEXT NOT NULL,
                        due_at BIGINT NOT NULL,
                        request TEXT NOT NULL,
                        state TEXT NOT NULL,
                        claimed_by TEXT,
                        claimed_at BIGINT
                    )
                    """,
                    "CREATE INDEX scheduled_by_due ON scheduled_notifications (state, due_at)",
                ]
            ),
            // Each sender's stored rich payloads, for their quota and retention.
            (5, ["CREATE INDEX rich_payloads_by_sender ON rich_payloads (hub, sender, created_at)"]),
            // Recovery: when a send must end (deadline), when it last moved (progress), what the
            // dispatch summary announced per platform, why it was given up; and the accepted
            // requests kept until they end, to publish again.
            (
                6,
                [
                    "ALTER TABLE notifications ADD COLUMN deadline BIGINT",
                    "ALTER TABLE notifications ADD COLUMN progress_at BIGINT",
                    "ALTER TABLE notifications ADD COLUMN dispatched TEXT",
                    "ALTER TABLE notifications ADD COLUMN reason TEXT",
                    "CREATE INDEX notifications_open ON notifications (state, deadline)",
                    """
                    CREATE TABLE unfinished_sends (
                        notification_id TEXT PRIMARY KEY,
                        hub TEXT NOT NULL,
                        request TEXT NOT NULL,
                        published_at BIGINT NOT NULL,
                        publishes BIGINT NOT NULL
                    )
                    """,
                    "CREATE INDEX unfinished_by_published ON unfinished_sends (published_at)",
                    // The targets of open notifications that have a result, each counted once.
                    """
                    CREATE TABLE result_targets (
                        notification_id TEXT NOT NULL,
                        target TEXT NOT NULL,
                        PRIMARY KEY (notification_id, target)
                    )
                    """,
                ]
            ),
            // How many registrations carry each tag, so a tag expression is paged from its
            // rarest driving tags. SQLite keeps them with triggers (one writer, so no counter
            // row is ever contended); PostgreSQL's planner statistics give the estimate there
            // (`SQLRegistrationStore.tagCounts`), since a counter row every writer of a common
            // tag updates would serialize them. PostgreSQL keeps statistics on hub and tag
            // together, since a tag's share of one hub is not its share of the table times the
            // hub's.
            (
                7,
                dialect == .sqlite
                    ? sqliteTagCounts : ["CREATE STATISTICS registration_tags_by_hub_and_tag (mcv, ndistinct) ON hub, tag FROM registration_tags"]
            ),
            // PostgreSQL writes an installation with its registrations in one call of a
            // function: a statement, not six round trips, each parsed and planned (the
            // client's work per round trip cost as much as the server's).
            (8, dialect == .postgres ? [postgresWriteInstallation(queried: false)] : []),
            // Sends whose counted targets are left to delete: a send that ends with many (a
            // broadcast's million) hands them to `sweepEndedTargets` instead of deleting them
            // in the transaction that ends it. On SQLite, `result_targets` becomes one B-tree
            // keyed by its primary key (a rowid table kept the rows and a second index of them,
            // two B-tree inserts per counted target).
            (
                9,
                ["CREATE TABLE ended_sends_with_targets (notification_id TEXT PRIMARY KEY)"]
                    + (dialect == .sqlite
                        ? [
                            """
                            CREATE TABLE result_targets_by_key (
                                notification_id TEXT NOT NULL,
                                target TEXT NOT NULL,
                                PRIMARY KEY (notification_id, target)
                            ) WITHOUT ROWID
                            """,
                            "INSERT INTO result_targets_by_key (notification_id, target) SELECT notification_id, target FROM result_targets",
                            "DROP TABLE result_targets",
                            "ALTER TABLE result_targets_by_key RENAME TO result_targets",
                        ] : [])
            ),
            // Installations queried by their filters from indexes: platform, user id, whether
            // the push channel expired, last update, and their tags (with the implicit
            // `$InstallationId:{…}` and `$UserId:{…}`) in a table of their own, as registrations
            // have theirs (an expired installation has no registrations left). Existing rows
            // are filled from their documents.
            (10, installationQueries(dialect)),
            // Idempotent sends: each `Idempotency-Key` a caller gave, with what it answered
            // (kept 24 h); and the SendRequests the dispatcher took, by the Kafka record they
            // came in, so one produced twice is dispatched once.
            (
                11,
                [
                    """
                    CREATE TABLE idempotency_keys (
                        scope TEXT NOT NULL,
                        idempotency_key TEXT NOT NULL,
                        fingerprint TEXT NOT NULL,
                        state TEXT NOT NULL,
                        claim_token TEXT NOT NULL,
                        notification_id TEXT,
                        collection TEXT,
                        created_at BIGINT NOT NULL,
                        PRIMARY KEY (scope, idempotency_key)
                    )
                    """,
                    "CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at)",
                    """
                    CREATE TABLE dispatched_requests (
                        hub TEXT NOT NULL,
                        notification_id TEXT NOT NULL,
                        source TEXT NOT NULL,
                        dispatched_at BIGINT NOT NULL,
                        PRIMARY KEY (hub, notification_id)
                    )
                    """,
                    "CREATE INDEX dispatched_requests_by_age ON dispatched_requests (dispatched_at)",
                ]
            ),
            // Per-device feedback: what a send asked for (NotificationDetails' body, tags and
            // platforms), every target that did not end in success (its error details), and
            // every handle pruned because its push service called it invalid (the feedback).
            (
                12,
                [
                    "ALTER TABLE notifications ADD COLUMN format TEXT",
                    "ALTER TABLE notifications ADD COLUMN tags TEXT",
                    "ALTER TABLE notifications ADD COLUMN body TEXT",
                    """
                    CREATE TABLE failed_targets (
                        notification_id TEXT NOT NULL,
                        target TEXT NOT NULL,
                        platform TEXT NOT NULL,
                        registration_id TEXT,
                        handle TEXT,
                        outcome TEXT NOT NULL,
                        pns_status BIGINT,
                        pns_reason TEXT,
                        attempts BIGINT NOT NULL,
                        at BIGINT NOT NULL,
                        PRIMARY KEY (notification_id, target)
                    )
                    """,
                    "CREATE INDEX failed_targets_by_age ON failed_targets (at)",
                    """
                    CREATE TABLE pruned_handles (
                        \(serial),
                        hub TEXT NOT NULL,
                        platform TEXT NOT NULL,
                        handle TEXT NOT NULL,
                        registration_id TEXT NOT NULL,
                        notification_id TEXT NOT NULL,
                        pns_status BIGINT,
                        pns_reason TEXT,
                        pruned_at BIGINT NOT NULL
                    )
                    """,
                    "CREATE INDEX pruned_handles_by_hub ON pruned_handles (hub, seq)",
                    "CREATE INDEX pruned_handles_by_age ON pruned_handles (pruned_at)",
                ]
            ),
            // Import and export jobs: what each was asked, where it is (the input's bytes and
            // lines consumed, its output files' lengths, an export's cursor), its counts, and
            // which ingress runs it until when.
            (
                13,
                [
                    """
                    CREATE TABLE jobs (
                        hub TEXT NOT NULL,
                        job_id TEXT NOT NULL,
                        type TEXT NOT NULL,
                        status TEXT NOT NULL,
                        import_file_uri TEXT,
                        output_container_uri TEXT,
                        input_path TEXT,
                        input_size BIGINT NOT NULL DEFAULT 0,
                        input_offset BIGINT NOT NULL DEFAULT 0,
                        line BIGINT NOT NULL DEFAULT 0,
                        output_bytes BIGINT NOT NULL DEFAULT 0,
                        failed_bytes BIGINT NOT NULL DEFAULT 0,
                        export_cursor TEXT,
                        export_total BIGINT NOT NULL DEFAULT 0,
                        succeeded BIGINT NOT NULL DEFAULT 0,
                        failed BIGINT NOT NULL DEFAULT 0,
                        progress BIGINT NOT NULL DEFAULT 0,
                        failure TEXT,
                        runner TEXT,
                        lease_until BIGINT,
                        created_at BIGINT NOT NULL,
                        updated_at BIGINT NOT NULL,
                        PRIMARY KEY (hub, job_id)
                    )
                    """,
                    "CREATE INDEX jobs_by_status ON jobs (status, created_at)",
                ]
            ),
            // Cheaper registration writes. Registrations of no installation or user (all of an
            // import's) are kept out of those two indexes: an insert maintains four, not six.
            // On PostgreSQL the columns PushHub indexes and compares compare as bytes (COLLATE
            // "C"), whatever the database's locale: ids, handles and tags are never sorted for
            // people, and a locale's comparison cost an import an eighth of its time. Both
            // rebuild indexes: on a large store this step takes a while, once.
            (
                14,
                [
                    "DROP INDEX registrations_by_installation",
                    "CREATE INDEX registrations_by_installation ON registrations (hub, installation_id) WHERE installation_id IS NOT NULL",
                    "DROP INDEX registrations_by_user",
                    "CREATE INDEX registrations_by_user ON registrations (hub, user_id) WHERE user_id IS NOT NULL",
                ] + (dialect == .postgres ? postgresByteOrder : [])
            ),
            // A job's tries in a row without progress. Version 13 first shipped without the
            // column, and stores made since have it: the table is made again with it, the jobs
            // copied (their tries counted from 0), so both kinds of store end the same.
            (
                15,
                [
                    """
                    CREATE TABLE jobs_with_attempts (
                        hub TEXT NOT NULL,
                        job_id TEXT NOT NULL,
                        type TEXT NOT NULL,
                        status TEXT NOT NULL,
                        import_file_uri TEXT,
                        output_container_uri TEXT,
                        input_path TEXT,
                        input_size BIGINT NOT NULL DEFAULT 0,
                        input_offset BIGINT NOT NULL DEFAULT 0,
                        line BIGINT NOT NULL DEFAULT 0,
                        output_bytes BIGINT NOT NULL DEFAULT 0,
                        failed_bytes BIGINT NOT NULL DEFAULT 0,
                        export_cursor TEXT,
                        export_total BIGINT NOT NULL DEFAULT 0,
                        succeeded BIGINT NOT NULL DEFAULT 0,
                        failed BIGINT NOT NULL DEFAULT 0,
                        progress BIGINT NOT NULL DEFAULT 0,
                        failure TEXT,
                        attempts BIGINT NOT NULL DEFAULT 0,
                        runner TEXT,
                        lease_until BIGINT,
                        created_at BIGINT NOT NULL,
                        updated_at BIGINT NOT NULL,
                        PRIMARY KEY (hub, job_id)
                    )
                    """,
                    "INSERT INTO jobs_with_attempts (hub, job_id, type, status, import_file_uri, output_container_uri, input_path, input_size, input_offset, line, output_bytes, failed_bytes, export_cursor, export_total, succeeded, failed, progress, failure, runner, lease_until, created_at, updated_at) SELECT hub, job_id, type, status, import_file_uri, output_container_uri, input_path, input_size, input_offset, line, output_bytes, failed_bytes, export_cursor, export_total, succeeded, failed, progress, failure, runner, lease_until, created_at, updated_at FROM jobs",
                    "DROP TABLE jobs",
                    "ALTER TABLE jobs_with_attempts RENAME TO jobs",
                    "CREATE INDEX jobs_by_status ON jobs (status, created_at)",
                ]
            ),
            // The web console lists a hub's sends, newest first, and counts those of the last day;
            // it tells a send's kind of audience (a direct send names no tags, as a broadcast).
            (16, ["CREATE INDEX notifications_by_hub ON notifications (hub, enqueued_at)", "ALTER TABLE notifications ADD COLUMN audience TEXT"]),
            // The installation's function again, its registrations read with their row lock (see it).
            (17, dialect == .postgres ? [postgresWriteInstallation(queried: true)] : []),
            // Again: an installation's tag rows written only when its tags changed, and then only
            // those that changed.
            (18, dialect == .postgres ? [postgresWriteInstallation(queried: true)] : []),
            // Fewer index entries for each new installation on PostgreSQL, where a write at ten
            // million registrations is bounded by the server's CPU: tag rows are found by their
            // key (the tags are in the row they belong to), so the indexes by registration and
            // by installation go, and the foreign key's check query for each tag row inserted
            // becomes a trigger that deletes a registration's tag rows with it. The function
            // again: it updates a stored installation in place and deletes tag rows by key.
            // SQLite keeps its schema: its foreign key needs the index, and its writes are
            // one writer's anyway.
            (19, dialect == .postgres ? postgresTagRowsByKey + [postgresWriteInstallation(queried: true)] : []),
            // Implicit tags (`$InstallationId:{…}`, `$UserId:{…}`) get no tag rows: the
            // registrations and installations that carry one are found by the column it names
            // (`SQLRegistrationStore.carrying`), which an index covers. They were 4 of a new
            // installation's 10 tag rows, with the longest keys. Their rows go, and the
            // function writes no more of them.
            (
                20,
                [Self.implicitTagRows(dialect, in: "registration_tags"), Self.implicitTagRows(dialect, in: "installation_tags")]
                    + (dialect == .postgres
                        ? [
                            postgresWriteInstallation(queried: true, implicitTagRows: false),
                            // A user's registrations in `seq` order from the index alone, as a
                            // tag's are (SQLite's index ends in the rowid, which is `seq`):
                            // without it a page by `$UserId:{…}` read and sorted every
                            // registration of the user.
                            "DROP INDEX registrations_by_user",
                            "CREATE INDEX registrations_by_user ON registrations (hub, user_id, seq) WHERE user_id IS NOT NULL",
                        ] : [])
            ),
            (21, dialect == .postgres ? [postgresWriteInstallations] : []),
            // An ended send's `deadline` is when it ended, so the recovery round finds the sends
            // to delete after `recovery.keepEnded` through the (state, deadline) index, which the
            // UPDATE that ends a send writes anyway (an index of its own on `ended_at` cost every
            // ending transaction a page more). Sends that ended before this version get theirs.
            // Registration ids issued and never used, by age, for the sweep that forgets them
            // after a day.
            (
                22,
                [
                    "UPDATE notifications SET deadline = ended_at WHERE ended_at IS NOT NULL",
                    "CREATE INDEX registration_ids_by_age ON registration_ids (issued_at)",
                ]
            ),
            // A send's dispatch summary is counted once by its `expected`, set with the first
            // summary and never before: the receipt a row of its own was one more statement and
            // one more table's page for every send.
            (23, ["DROP TABLE result_receipts"]),
            // Registrations by their ExpirationTime, for the sweep that deletes them once past it;
            // those without one (most) have no entry.
            (24, ["CREATE INDEX registrations_by_expiry ON registrations (expires_at) WHERE expires_at IS NOT NULL"]),
            // Rich payloads by age, for the sweep that deletes them past their week whatever
            // their sender does.
            (25, ["CREATE INDEX rich_payloads_by_age ON rich_payloads (created_at)"]),
            // When each installation whose push channel expired (and whose registrations went
            // with it) expires: it has no registration left to carry its ExpirationTime to the
            // sweep. Those pruned before this version are found from their documents. A
            // document that does not read, or whose time is not one, is passed over, as the
            // sweeps pass it over, rather than failing the migration: on SQLite by
            // `json_valid` and `julianday`, which gives NULL for what is not a date; on
            // PostgreSQL row by row, only times in PushHub's own form (the cast would take
            // `tomorrow`), a data error (bad JSON, a 13th month) skipping the row. No `?`: it
            // would be a parameter.
            (
                26,
                [
                    """
                    CREATE TABLE installation_expiries (
                        hub TEXT NOT NULL,
                        installation_id TEXT NOT NULL,
                        expires_at BIGINT NOT NULL,
                        PRIMARY KEY (hub, installation_id)
                    )
                    """,
                    "CREATE INDEX installation_expiries_by_time ON installation_expiries (expires_at)",
                    dialect == .sqlite
                        ? """
                        INSERT INTO installation_expiries (hub, installation_id, expires_at)
                        SELECT hub, installation_id, expires_at FROM (
                            SELECT hub, installation_id,
                                CAST(ROUND((julianday(json_extract(document, '$.expirationTime')) - 2440587.5) * 86400000) AS INTEGER) AS expires_at
                            FROM installations WHERE expired = 1 AND json_valid(document)
                        ) WHERE expires_at IS NOT NULL
                        """
                        : """
                        DO $$
                        DECLARE
                            installation RECORD;
                            expiry TEXT;
                            milliseconds BIGINT;
                        BEGIN
                            FOR installation IN SELECT hub, installation_id, document FROM installations WHERE expired = 1 LOOP
                                -- Read in a block of its own (a subtransaction), the insert
                                -- after it: a block that writes nothing takes no transaction id.
                                milliseconds := NULL;
                                BEGIN
                                    expiry := installation.document::json->>'expirationTime';
                                    IF expiry ~ '^[1-9][0-9]{3}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+){0,1}Z$' THEN
                                        milliseconds := (extract(epoch FROM expiry::timestamptz) * 1000)::BIGINT;
                                    END IF;
                                EXCEPTION WHEN data_exception THEN
                                    milliseconds := NULL;
                                END;
                                IF milliseconds IS NOT NULL THEN
                                    INSERT INTO installation_expiries (hub, installation_id, expires_at)
                                    VALUES (installation.hub, installation.installation_id, milliseconds);
                                END IF;
                            END LOOP;
                        END
                        $$
                        """,
                ]
            ),
        ]
    }

    /// Several installations' writes in one statement (`PostgresInstallationWrites`), each the
    /// same call of `pushhub_write_installation` as alone, in the order given. `p_writes` is a
    /// JSON array of objects named by that function's parameters, with the document and the
    /// registrations as JSON values rather than text. Returns how many it wrote.
    static let postgresWriteInstallations = """
        CREATE OR REPLACE FUNCTION pushhub_write_installations(p_writes TEXT) RETURNS BIGINT LANGUAGE plpgsql AS $$
        DECLARE
            w RECORD;
            written BIGINT := 0;
        BEGIN
            FOR w IN SELECT * FROM ROWS FROM (json_to_recordset(p_writes::json) AS (
                hub TEXT, installation_id TEXT, document JSON, updated_at BIGINT, registrations JSON,
                platform TEXT, user_id TEXT, expired BIGINT, tags TEXT)) WITH ORDINALITY
                AS x(hub, installation_id, document, updated_at, registrations, platform, user_id, expired, tags, n) ORDER BY n
            LOOP
                PERFORM pushhub_write_installation(w.hub, w.installation_id, w.document::text, w.updated_at, w.registrations::text,
                    w.platform, w.user_id, w.expired, w.tags);
                written := written + 1;
            END LOOP;
            RETURN written;
        END
        $$
        """

    /// The DELETE of a tag table's rows for implicit tags, which `Tags.implicit` tells apart:
    /// `$InstallationId:{…}` or `$UserId:{…}`, and nothing else (SQLite's LIKE ignores case, its
    /// GLOB does not).
    private static func implicitTagRows(_ dialect: SQLDialect, in table: String) -> String {
        "DELETE FROM \(table) WHERE " + implicitTag(dialect, "tag")
    }

    /// A condition that `column` holds an implicit tag.
    private static func implicitTag(_ dialect: SQLDialect, _ column: String) -> String {
        dialect == .postgres
            ? "(\(column) LIKE '$InstallationId:{%}' OR \(column) LIKE '$UserId:{%}')"
            : "(\(column) GLOB '$InstallationId:{*}' OR \(column) GLOB '$UserId:{*}')"
    }

    /// Version 19 on PostgreSQL: a registration's tag rows deleted with it by their key (its
    /// hub, each tag of its `tags` column, its seq), where the foreign key's cascade found them
    /// through an index by seq that every tag row inserted had to enter, after a check query.
    private static let postgresTagRowsByKey = [
        // First, any tag row that its row's tags do not name (a drift the cascade would have
        // cleaned up at the row's delete, and the trigger, which deletes the tags named, would
        // not): 9 s at ten million registrations.
        "DELETE FROM registration_tags t USING registrations r WHERE r.seq = t.seq AND strpos(',' || r.tags || ',', ',' || t.tag || ',') = 0",
        """
        DELETE FROM installation_tags t WHERE NOT EXISTS (SELECT 1 FROM installations i
            WHERE i.hub = t.hub AND i.installation_id = t.installation_id AND strpos(',' || i.tags || ',', ',' || t.tag || ',') > 0)
        """,
        """
        CREATE FUNCTION pushhub_registration_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM registration_tags WHERE hub = OLD.hub AND tag = ANY (string_to_array(OLD.tags, ',')) AND seq = OLD.seq;
            RETURN NULL;
        END
        $$
        """,
        "CREATE TRIGGER registration_tags_deleted AFTER DELETE ON registrations FOR EACH ROW EXECUTE FUNCTION pushhub_registration_deleted()",
        "ALTER TABLE registration_tags DROP CONSTRAINT registration_tags_seq_fkey",
        "DROP INDEX registration_tags_by_registration",
        "DROP INDEX installation_tags_by_installation",
    ]

    /// The key columns of the registration tables as bytes-ordered text (version 14).
    private static let postgresByteOrder = [
        ("registrations", ["hub", "registration_id", "handle", "installation_id", "user_id"]),
        ("registration_tags", ["hub", "tag"]),
        ("registration_ids", ["hub", "registration_id"]),
        ("installations", ["hub", "installation_id", "platform", "user_id"]),
        ("installation_tags", ["hub", "tag", "installation_id"]),
    ].map { table, columns in
        "ALTER TABLE \(table) " + columns.map { "ALTER COLUMN \($0) TYPE TEXT COLLATE \"C\"" }.joined(separator: ", ")
    }

    static func installationQueries(_ dialect: SQLDialect) -> [String] {
        let sqlite = dialect == .sqlite
        let json = { (path: String) in sqlite ? "json_extract(document, '$.\(path)')" : "(document::json->>'\(path)')" }
        let declaredTags = sqlite ? "json_each(i.document, '$.tags') j" : "json_array_elements_text(i.document::json->'tags') AS j(value)"
        let joined = sqlite ? "group_concat(tag, ',')" : "string_agg(tag, ',')"
        return [
            "ALTER TABLE installations ADD COLUMN platform TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE installations ADD COLUMN user_id TEXT",
            "ALTER TABLE installations ADD COLUMN expired BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE installations ADD COLUMN tags TEXT NOT NULL DEFAULT ''",
            """
            CREATE TABLE installation_tags (
                hub TEXT NOT NULL,
                tag TEXT NOT NULL,
                installation_id TEXT NOT NULL,
                PRIMARY KEY (hub, tag, installation_id)
            )\(sqlite ? " WITHOUT ROWID" : "")
            """,
            "CREATE INDEX installation_tags_by_installation ON installation_tags (hub, installation_id)",
            "CREATE INDEX installations_by_platform ON installations (hub, platform, installation_id)",
            "CREATE INDEX installations_by_user ON installations (hub, user_id, installation_id)",
            "CREATE INDEX installations_by_expired ON installations (hub, expired, installation_id)",
            "CREATE INDEX installations_by_update ON installations (hub, updated_at, installation_id)",
            """
            UPDATE installations SET platform = lower(\(json("platform"))), user_id = \(json("userId")),
                expired = CASE WHEN \(json("pushChannelExpired")) = \(sqlite ? "1" : "'true'") THEN 1 ELSE 0 END
            """,
            """
            INSERT INTO installation_tags (hub, tag, installation_id)
            SELECT DISTINCT hub, tag, installation_id FROM (
                SELECT i.hub, j.value AS tag, i.installation_id FROM installations i, \(declaredTags)
                UNION SELECT hub, '$InstallationId:{' || installation_id || '}', installation_id FROM installations
                UNION SELECT hub, '$UserId:{' || user_id || '}', installation_id FROM installations WHERE user_id IS NOT NULL
            ) AS everything
            """,
            """
            UPDATE installations SET tags = coalesce((SELECT \(joined) FROM installation_tags t
                WHERE t.hub = installations.hub AND t.installation_id = installations.installation_id), '')
            """,
        ] + (sqlite ? [] : [postgresWriteInstallation(queried: true), postgresWriteInstallationOfVersion9])
    }

    /// The function as version 9 called it, kept for ingresses of that version while a
    /// deployment is upgraded: it reads the queried columns from the document and calls the
    /// new one, so their writes keep the installation queries right.
    static let postgresWriteInstallationOfVersion9 = """
        CREATE OR REPLACE FUNCTION pushhub_write_installation(
            p_hub TEXT, p_installation_id TEXT, p_document TEXT, p_updated_at BIGINT, p_registrations TEXT
        ) RETURNS BIGINT LANGUAGE sql AS $$
            SELECT pushhub_write_installation(
                p_hub, p_installation_id, p_document, p_updated_at, p_registrations,
                lower(p_document::json->>'platform'), p_document::json->>'userId',
                CASE WHEN (p_document::json->>'pushChannelExpired') = 'true' THEN 1::BIGINT ELSE 0::BIGINT END,
                (SELECT coalesce(string_agg(tag, ','), '') FROM (
                    SELECT json_array_elements_text(p_document::json->'tags') AS tag
                    UNION SELECT '$InstallationId:{' || p_installation_id || '}'
                    UNION SELECT '$UserId:{' || (p_document::json->>'userId') || '}' WHERE p_document::json->>'userId' IS NOT NULL
                ) AS tags))
        $$
        """

    /// What `SQLRegistrationStore.writeInstallation` does, as one PostgreSQL function: the
    /// installation row first (its row lock orders concurrent writers of one installation, since
    /// every writer, patch, prune and delete takes it first;
    /// every later statement takes a new snapshot, as in READ COMMITTED), then each
    /// registration updated in place or inserted, only the tag rows that changed written,
    /// and the installation's registrations it no longer has deleted. Each registration is read
    /// with its row lock (from version 17): a writer that found the installation row gone (a
    /// prune or delete beside a delete) takes none of its lock, and could delete the row between
    /// the read and its update, which then changed nothing and the tag rows after it broke
    /// their foreign key; now it waits, and the row it deleted is inserted anew. `registrations` is a
    /// JSON array of rows named by column (`SQLRegistrationStore.installationRows`).
    ///
    /// From version 10 (`queried`), it also keeps the installation's queried columns (platform,
    /// user id, expired, and its tags comma-joined) and its rows in `installation_tags`; from
    /// version 18 those rows only where its tags changed (the tags stored before read with the
    /// installation row's lock, first), where it had deleted and inserted them all: an upsert of
    /// the same installation again wrote ten index entries for nothing.
    ///
    /// From version 19, a stored installation is updated in place, and a new one inserted
    /// (`ON CONFLICT DO NOTHING` for a writer beside it, after which the row is read again, with
    /// its lock, and updated), where every write was an upsert that probed the key for a
    /// conflict first; and tag rows are deleted by their key, the tags stored before naming
    /// them, since the indexes by registration and by installation are gone.
    ///
    /// From version 20 (`implicitTagRows` false), it writes no tag rows for implicit tags.
    static func postgresWriteInstallation(queried: Bool, implicitTagRows: Bool = true) -> String {
        // Of the tags of `unnest(…) AS tag`, only those that get tag rows (the text of the
        // versions before 20 unchanged).
        let notImplicit = "NOT " + implicitTag(.postgres, "tag")
        let rowed = implicitTagRows ? "" : " AND " + notImplicit
        let parameters = queried ? ", p_platform TEXT, p_user_id TEXT, p_expired BIGINT, p_tags TEXT" : ""
        let columns = queried ? ", platform, user_id, expired, tags" : ""
        let values = queried ? ", p_platform, p_user_id, p_expired, p_tags" : ""
        let updates = queried ? ", platform = p_platform, user_id = p_user_id, expired = p_expired, tags = p_tags" : ""
        // The tags stored before: none for a new installation, whose rows all go in.
        let tagRows =
            queried
            ? """
            IF stored_tags IS NULL THEN
                    INSERT INTO installation_tags (hub, tag, installation_id)
                        SELECT DISTINCT p_hub, tag, p_installation_id FROM unnest(string_to_array(p_tags, ',')) AS tag WHERE tag <> ''\(rowed)
                        ON CONFLICT DO NOTHING;
                ELSIF stored_tags <> p_tags THEN
                    old_tags := string_to_array(stored_tags, ',');
                    new_tags := string_to_array(p_tags, ',');
                    DELETE FROM installation_tags WHERE hub = p_hub AND tag = ANY (old_tags) AND tag <> ALL (new_tags)
                        AND installation_id = p_installation_id;
                    INSERT INTO installation_tags (hub, tag, installation_id)
                        SELECT DISTINCT p_hub, tag, p_installation_id FROM unnest(new_tags) AS tag WHERE tag <> '' AND tag <> ALL (old_tags)\(rowed)
                        ON CONFLICT DO NOTHING;
                END IF;
            """ : ""
        let storedColumn = queried ? "tags" : "''"
        return """
            CREATE OR REPLACE FUNCTION pushhub_write_installation(
                p_hub TEXT, p_installation_id TEXT, p_document TEXT, p_updated_at BIGINT, p_registrations TEXT\(parameters)
            ) RETURNS BIGINT LANGUAGE plpgsql AS $$
            DECLARE
                wanted RECORD;
                current RECORD;
                new_seq BIGINT;
                new_tags TEXT[];
                old_tags TEXT[];
                kept TEXT[] := '{}';
                stored_tags TEXT;
            BEGIN
                LOOP
                    SELECT \(storedColumn) INTO stored_tags FROM installations WHERE hub = p_hub AND installation_id = p_installation_id FOR UPDATE;
                    IF FOUND THEN
                        UPDATE installations SET document = p_document, updated_at = p_updated_at\(updates)
                            WHERE hub = p_hub AND installation_id = p_installation_id;
                        EXIT;
                    END IF;
                    INSERT INTO installations (hub, installation_id, document, updated_at\(columns))
                    VALUES (p_hub, p_installation_id, p_document, p_updated_at\(values))
                    ON CONFLICT (hub, installation_id) DO NOTHING;
                    EXIT WHEN FOUND;
                END LOOP;
                \(tagRows)
                FOR wanted IN SELECT * FROM json_to_recordset(p_registrations::json) AS x(
                    registration_id TEXT, format TEXT, handle TEXT, p256dh TEXT, auth TEXT, tags TEXT, template_name TEXT,
                    template_body TEXT, template_headers TEXT, template_expiry TEXT, user_id TEXT, expires_at BIGINT)
                LOOP
                    kept := kept || wanted.registration_id;
                    new_tags := CASE WHEN wanted.tags = '' THEN '{}'::TEXT[] ELSE string_to_array(wanted.tags, ',') END;
                    SELECT seq, version, tags INTO current FROM registrations
                        WHERE hub = p_hub AND installation_id = p_installation_id AND registration_id = wanted.registration_id
                        FOR UPDATE;
                    IF FOUND THEN
                        UPDATE registrations SET format = wanted.format, handle = wanted.handle, p256dh = wanted.p256dh, auth = wanted.auth,
                            tags = wanted.tags, template_name = wanted.template_name, template_body = wanted.template_body,
                            template_headers = wanted.template_headers, template_expiry = wanted.template_expiry,
                            user_id = wanted.user_id, expires_at = wanted.expires_at, version = current.version + 1, updated_at = p_updated_at
                            WHERE seq = current.seq;
                        old_tags := CASE WHEN current.tags = '' THEN '{}'::TEXT[] ELSE string_to_array(current.tags, ',') END;
                        IF new_tags IS DISTINCT FROM old_tags THEN
                            DELETE FROM registration_tags WHERE hub = p_hub AND tag = ANY (old_tags) AND tag <> ALL (new_tags) AND seq = current.seq;
                            INSERT INTO registration_tags (hub, tag, seq) SELECT p_hub, tag, current.seq FROM unnest(new_tags) AS tag
                                WHERE tag <> ALL (old_tags)\(rowed);
                        END IF;
                    ELSE
                        INSERT INTO registrations (hub, registration_id, format, handle, p256dh, auth, tags, template_name, template_body,
                            template_headers, template_expiry, installation_id, user_id, expires_at, version, updated_at)
                        VALUES (p_hub, wanted.registration_id, wanted.format, wanted.handle, wanted.p256dh, wanted.auth, wanted.tags,
                            wanted.template_name, wanted.template_body, wanted.template_headers, wanted.template_expiry, p_installation_id,
                            wanted.user_id, wanted.expires_at, 1, p_updated_at)
                        RETURNING seq INTO new_seq;
                        INSERT INTO registration_tags (hub, tag, seq) SELECT p_hub, tag, new_seq FROM unnest(new_tags) AS tag\(implicitTagRows ? "" : " WHERE " + notImplicit);
                    END IF;
                END LOOP;
                DELETE FROM registrations WHERE hub = p_hub AND installation_id = p_installation_id AND registration_id <> ALL (kept);
                RETURN array_length(kept, 1);
            END
            $$
            """
    }

    private static let sqliteTagCounts = [
        "CREATE TABLE tag_counts (hub TEXT NOT NULL, tag TEXT NOT NULL, registrations BIGINT NOT NULL, PRIMARY KEY (hub, tag))",
        "INSERT INTO tag_counts (hub, tag, registrations) SELECT hub, tag, count(*) FROM registration_tags WHERE substr(tag, 1, 1) <> '$' GROUP BY hub, tag",
        """
        CREATE TRIGGER registration_tags_counted AFTER INSERT ON registration_tags WHEN substr(new.tag, 1, 1) <> '$' BEGIN
            INSERT INTO tag_counts (hub, tag, registrations) VALUES (new.hub, new.tag, 1)
            ON CONFLICT (hub, tag) DO UPDATE SET registrations = registrations + 1;
        END
        """,
        // Implicit tags (`$InstallationId:{…}`, `$UserId:{…}`) are one installation's or one
        // user's and are not counted; a tag nobody carries any more leaves no row behind.
        """
        CREATE TRIGGER registration_tags_uncounted AFTER DELETE ON registration_tags WHEN substr(old.tag, 1, 1) <> '$' BEGIN
            UPDATE tag_counts SET registrations = registrations - 1 WHERE hub = old.hub AND tag = old.tag;
            DELETE FROM tag_counts WHERE hub = old.hub AND tag = old.tag AND registrations <= 0;
        END
        """,
    ]

    /// Brings the database to the newest version; each step in its own transaction. On
    /// PostgreSQL every migration transaction first takes one advisory lock, so replicas that
    /// start together apply each step once, one after the other.
    static func run(on database: any SQLDatabase) async throws {
        try await database.migrating { try await steps(on: database) }
    }

    private static func steps(on database: any SQLDatabase) async throws {
        let lock: (@Sendable (any SQLConnection) async throws -> Void) = { connection in
            if database.dialect == .postgres {
                _ = try await connection.query("SELECT pg_advisory_xact_lock(7401150) AS locked", [])
            }
        }
        try await database.write { connection in
            try await lock(connection)
            try await connection.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)", [])
        }
        for step in steps(database.dialect) {
            try await database.write { connection in
                try await lock(connection)
                let applied = try await connection.query("SELECT version FROM schema_migrations WHERE version = ?", [.integer(Int64(step.version))])
                guard applied.isEmpty else { return }
                for statement in step.statements { try await connection.execute(statement, []) }
                try await connection.execute(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)", [.integer(Int64(step.version)), SQLValue(Date())])
            }
        }
    }
}
