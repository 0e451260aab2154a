INSERT INTO pgsql_users (username, password, active, use_ssl, default_hostgroup, transaction_persistent, fast_forward, backend, frontend, max_connections, comment) VALUES ('star', '***', 1, 0, 20, 1, 0, 1, 1, 10000, 'proxysql-sync');
LOAD PGSQL USERS TO RUNTIME;
SAVE PGSQL USERS TO DISK;
