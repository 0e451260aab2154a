UPDATE mysql_servers SET status='ONLINE', weight=1, compression=0, max_connections=1000, max_replication_lag=0, use_ssl=0, max_latency_ms=0, comment='' WHERE hostgroup_id=11 AND hostname='db3' AND port=3306;
LOAD MYSQL SERVERS TO RUNTIME;
SAVE MYSQL SERVERS TO DISK;
