-- The compose file's MySQL: the loader's account (see grants.sql for what each grant is for).
CREATE USER IF NOT EXISTS 'loader'@'%' IDENTIFIED BY 'loader';
GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'loader'@'%';
