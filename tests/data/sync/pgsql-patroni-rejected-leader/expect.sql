INSERT INTO pgsql_servers (hostgroup_id, hostname, port, status, weight, compression, max_connections, max_replication_lag, use_ssl, max_latency_ms, comment) VALUES (21, '10.0.0.4', 5444, 'ONLINE', 1, 0, 1000, 0, 0, 0, 'pgdemo/pg4');
LOAD PGSQL SERVERS TO RUNTIME;
SAVE PGSQL SERVERS TO DISK;
