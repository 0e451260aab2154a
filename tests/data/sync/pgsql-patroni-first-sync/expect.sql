INSERT INTO pgsql_servers (hostgroup_id, hostname, port, status, weight, compression, max_connections, max_replication_lag, use_ssl, max_latency_ms, comment) VALUES (20, '10.0.0.1', 5441, 'ONLINE', 1, 0, 1000, 0, 0, 0, 'pgdemo/pg1'), (21, '10.0.0.2', 5442, 'ONLINE', 1, 0, 1000, 0, 0, 0, 'pgdemo/pg2'), (21, '10.0.0.3', 5443, 'ONLINE', 1, 0, 1000, 0, 0, 0, 'pgdemo/pg3'), (21, '10.0.0.6', 5446, 'ONLINE', 1, 0, 1000, 0, 0, 0, 'pgdemo/pg6');
LOAD PGSQL SERVERS TO RUNTIME;
SAVE PGSQL SERVERS TO DISK;
INSERT INTO pgsql_users (username, password, active, use_ssl, default_hostgroup, transaction_persistent, fast_forward, backend, frontend, max_connections, comment) VALUES ('app', '***', 1, 0, 20, 1, 0, 1, 1, 10000, 'proxysql-sync'), ('batch', '***', 1, 0, 21, 1, 0, 1, 1, 7, 'proxysql-sync');
LOAD PGSQL USERS TO RUNTIME;
SAVE PGSQL USERS TO DISK;
