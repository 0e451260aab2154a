DELETE FROM mysql_servers WHERE hostgroup_id=11 AND hostname='db2' AND port=3306;
LOAD MYSQL SERVERS TO RUNTIME;
