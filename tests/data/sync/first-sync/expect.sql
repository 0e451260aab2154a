INSERT INTO mysql_servers (hostgroup_id, hostname, port, status, weight, compression, max_connections, max_replication_lag, use_ssl, max_latency_ms, comment) VALUES (10, 'db1', 3306, 'ONLINE', 1, 0, 1000, 0, 0, 0, ''), (11, 'db2', 3306, 'ONLINE', 1, 0, 1000, 0, 0, 0, ''), (11, 'db3', 3306, 'ONLINE', 1, 0, 1000, 0, 0, 0, ''), (21, 'db9', 3307, 'ONLINE', 1, 0, 1000, 0, 0, 0, '');
LOAD MYSQL SERVERS TO RUNTIME;
SAVE MYSQL SERVERS TO DISK;
INSERT INTO mysql_users (username, password, active, use_ssl, default_hostgroup, default_schema, schema_locked, transaction_persistent, fast_forward, backend, frontend, max_connections, comment) VALUES ('app', '***', 1, 0, 10, NULL, 0, 1, 0, 1, 1, 10000, 'proxysql-sync');
LOAD MYSQL USERS TO RUNTIME;
SAVE MYSQL USERS TO DISK;
