DELETE FROM mysql_users WHERE username='app';
INSERT INTO mysql_users (username, password, active, use_ssl, default_hostgroup, default_schema, schema_locked, transaction_persistent, fast_forward, backend, frontend, max_connections, comment) VALUES ('app', '***', 1, 0, 11, NULL, 0, 1, 0, 1, 1, 10000, 'proxysql-sync');
LOAD MYSQL USERS TO RUNTIME;
SAVE MYSQL USERS TO DISK;
