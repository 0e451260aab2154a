UPDATE mysql_servers SET status='ONLINE', weight=100, compression=0, max_connections=1000, max_replication_lag=30, use_ssl=0, max_latency_ms=0, comment='' WHERE hostgroup_id=11 AND hostname='db2' AND port=3306;
LOAD MYSQL SERVERS TO RUNTIME;
SAVE MYSQL SERVERS TO DISK;
