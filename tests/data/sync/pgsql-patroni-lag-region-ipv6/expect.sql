INSERT INTO pgsql_servers (hostgroup_id, hostname, port, status, weight, compression, max_connections, max_replication_lag, use_ssl, max_latency_ms, comment) VALUES (30, 'fd00::1', 5432, 'ONLINE', 1, 0, 1000, 0, 0, 0, 'billing/b1'), (31, 'fd00::2', 6432, 'ONLINE', 1, 0, 1000, 0, 0, 0, 'billing/b2');
LOAD PGSQL SERVERS TO RUNTIME;
SAVE PGSQL SERVERS TO DISK;
