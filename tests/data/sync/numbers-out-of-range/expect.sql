INSERT INTO mysql_servers (hostgroup_id, hostname, port, status, weight, compression, max_connections, max_replication_lag, use_ssl, max_latency_ms, comment) VALUES (10, 'db1', 3306, 'ONLINE', 1, 0, 1000, 0, 0, 0, ''), (11, 'db8', 3306, 'ONLINE', 7, 0, 1000, 0, 0, 0, '');
LOAD MYSQL SERVERS TO RUNTIME;
SAVE MYSQL SERVERS TO DISK;
