-- The account the loader uses on the source. Replace the password, and the host pattern with
-- the address the loader connects from.
--   REPLICATION SLAVE  : read the binlog over the replication protocol (COM_BINLOG_DUMP)
--   REPLICATION CLIENT : SHOW MASTER STATUS / SHOW BINARY LOG STATUS / SHOW BINARY LOGS
--   SELECT             : the initial load and reading table schemas
-- On MariaDB 10.5+ REPLICATION CLIENT is called BINLOG MONITOR (the old name still works).
-- On MySQL, `loader checksum` also needs RELOAD: MySQL does not report the binlog position of a
-- consistent snapshot, so the snapshot starts under the global read lock (held for a moment).
-- On MySQL 8.0.17+, BACKUP_ADMIN lets the loader read the binlog position together with its GTID
-- set (performance_schema.log_status): SHOW BINARY LOG STATUS may leave out the GTIDs of
-- transactions still committing. Without it the loader reads the status until it repeats.
--   GRANT RELOAD, BACKUP_ADMIN ON *.* TO 'loader'@'%';
CREATE USER IF NOT EXISTS 'loader'@'%' IDENTIFIED BY 'change-me';
GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'loader'@'%';
