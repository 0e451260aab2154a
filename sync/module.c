/* module.c: the names of the MySQL and PostgreSQL sides of ProxySQL's admin (module.h). */
#include "module.h"

const struct px_module px_mysql = {
	.name = "mysql",
	.cmd = "MYSQL",
	.tables = { "mysql_servers", "mysql_users" },
	.default_port = 3306,
	.schema = true,
	.checksum_cmds = true,
	.hot_path = true,
	.monitor_user = "mysql-monitor_username",
	.variables = "mysql_variables",
	.servers_v2 = "mysql_servers_v2",
	.families_sql =
		"SELECT 'mysql_replication_hostgroups', writer_hostgroup, reader_hostgroup, -1, -1 "
		"FROM runtime_mysql_replication_hostgroups UNION ALL "
		"SELECT 'mysql_galera_hostgroups', writer_hostgroup, backup_writer_hostgroup, reader_hostgroup, "
		"offline_hostgroup FROM runtime_mysql_galera_hostgroups UNION ALL "
		"SELECT 'mysql_group_replication_hostgroups', writer_hostgroup, backup_writer_hostgroup, "
		"reader_hostgroup, offline_hostgroup FROM runtime_mysql_group_replication_hostgroups UNION ALL "
		"SELECT 'mysql_aws_aurora_hostgroups', writer_hostgroup, reader_hostgroup, -1, -1 "
		"FROM runtime_mysql_aws_aurora_hostgroups UNION ALL "
		"SELECT '', COUNT(*), -1, -1, -1 FROM runtime_proxysql_servers",
};

/* ProxySQL 3.0's PostgreSQL side: the same admin model, one monitor table, no CHECKSUM commands
 * (read in sysown/proxysql v3.0's Admin_Handler.cpp: only the MYSQL forms exist). */
const struct px_module px_pgsql = {
	.name = "pgsql",
	.cmd = "PGSQL",
	.tables = { "pgsql_servers", "pgsql_users" },
	.default_port = 5432,
	.schema = false,
	.checksum_cmds = false,
	.hot_path = false,
	.monitor_user = "pgsql-monitor_username",
	.variables = "pgsql_variables",
	.servers_v2 = "pgsql_servers_v2",
	.families_sql = "SELECT 'pgsql_replication_hostgroups', writer_hostgroup, reader_hostgroup, -1, -1 "
			"FROM runtime_pgsql_replication_hostgroups UNION ALL "
			"SELECT '', COUNT(*), -1, -1, -1 FROM runtime_proxysql_servers",
};
