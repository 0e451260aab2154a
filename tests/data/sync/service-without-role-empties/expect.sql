UPDATE mysql_servers SET status='OFFLINE_SOFT' WHERE hostgroup_id=10 AND hostname='10.0.0.1' AND port=3306;
UPDATE mysql_servers SET status='OFFLINE_SOFT' WHERE hostgroup_id=11 AND hostname='10.0.0.3' AND port=3306;
LOAD MYSQL SERVERS TO RUNTIME;
SAVE MYSQL SERVERS TO DISK;
