import GRDB

extension Journal {
    /// Daemon settings changed at runtime (`daemon.setLimits`), by key; they win over the
    /// configuration file until changed again.
    public func settings() throws -> [String: String] {
        try read { db in
            Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT key, value FROM settings").map {
                (try $0.decode(String.self, forColumn: "key"), try $0.decode(String.self, forColumn: "value"))
            })
        }
    }

    /// Stores (or, with nil, removes) the values in one transaction.
    public func setSettings(_ values: [String: String?]) throws {
        try write { db in
            for (key, value) in values {
                if let value {
                    try db.execute(sql: "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                                   arguments: [key, value])
                } else {
                    try db.execute(sql: "DELETE FROM settings WHERE key = ?", arguments: [key])
                }
            }
        }
    }
}
