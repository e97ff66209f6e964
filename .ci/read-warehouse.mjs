// Opens a sepipe warehouse with another DuckDB (the @duckdb/node-api
// installed under PREFIX), reads every table and view of its main schema
// and compares the row counts with EXPECTED, written with the bundled
// DuckDB (lines "name,count").
//
//   node .ci/read-warehouse.mjs PREFIX WAREHOUSE.duckdb EXPECTED.csv
//
// PREFIX is an npm --prefix folder or its node_modules folder. Exits 1
// naming every table or view that could not be read or whose count
// differs, 2 on a usage or setup error.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const [prefixArg, warehouse, expectedFile] = process.argv.slice(2);
if (!prefixArg || !warehouse || !expectedFile) {
  console.error('usage: node read-warehouse.mjs PREFIX WAREHOUSE.duckdb EXPECTED.csv');
  process.exit(2);
}

let prefix = path.resolve(prefixArg);
if (path.basename(prefix) === 'node_modules') prefix = path.dirname(prefix);
const require = createRequire(path.join(prefix, 'package.json'));
let DuckDBInstance, pkgVersion;
try {
  ({ DuckDBInstance } = require('@duckdb/node-api')); // CommonJS, "main": ./lib/index.js
  pkgVersion = require('@duckdb/node-api/package.json').version;
} catch (e) {
  console.error(`cannot load @duckdb/node-api from ${prefix}: ${String(e?.message ?? e).split('\n')[0]}`);
  process.exit(2);
}

// Expected counts; a header line "name,count" is allowed. Names are
// sepipe's ([A-Za-z0-9_-]); the count is after the last comma.
const expected = new Map();
for (const line of readFileSync(expectedFile, 'utf8').split('\n')) {
  const l = line.trim();
  if (l === '' || l === 'name,count') continue;
  const i = l.lastIndexOf(',');
  const n = i > 0 ? l.slice(i + 1) : '';
  if (!/^[0-9]+$/.test(n)) {
    console.error(`${expectedFile}: bad line ${JSON.stringify(line)}`);
    process.exit(2);
  }
  expected.set(l.slice(0, i), BigInt(n));
}
if (expected.size === 0) {
  console.error(`${expectedFile}: no tables`);
  process.exit(2);
}

const ident = (name) => '"' + name.replaceAll('"', '""') + '"';
const lit = (s) => "'" + s.replaceAll("'", "''") + "'";
const msg = (e) => String(e?.message ?? e).split('\n')[0];

const failures = [];
let instance, conn;
try {
  instance = await DuckDBInstance.create(path.resolve(warehouse), { access_mode: 'READ_ONLY' });
  conn = await instance.connect();
} catch (e) {
  console.error(`@duckdb/node-api ${pkgVersion}: cannot open ${warehouse}: ${msg(e)}`);
  process.exit(1);
}
const rows = async (sql) => (await conn.runAndReadAll(sql)).getRows();

const [[version]] = await rows('SELECT version()');
const [[catalog]] = await rows('SELECT current_database()');
console.log(`DuckDB ${version} (@duckdb/node-api ${pkgVersion}), catalog ${catalog}`);

const relations = await rows(`
  SELECT table_name, 'table' FROM duckdb_tables()
   WHERE NOT internal AND database_name = ${lit(catalog)} AND schema_name = 'main'
  UNION ALL
  SELECT view_name, 'view' FROM duckdb_views()
   WHERE NOT internal AND database_name = ${lit(catalog)} AND schema_name = 'main'
  ORDER BY 1`);

const seen = new Set();
const counts = [];
for (const [name, kind] of relations) {
  seen.add(name);
  let n;
  try {
    const [[c]] = await rows(`SELECT count(*) FROM ${ident(name)}`);
    n = BigInt(c); // BIGINT comes back as a BigInt; BigInt() also takes a number
    // count(*) can answer from row-group metadata alone; hash every
    // column so each one's data is actually decoded too.
    await rows(`SELECT max(hash(COLUMNS(*))) FROM ${ident(name)}`);
  } catch (e) {
    failures.push(`${kind} ${name}: not readable: ${msg(e)}`);
    continue;
  }
  counts.push(`${name}=${n}`);
  if (!expected.has(name)) {
    failures.push(`${kind} ${name}: not in the bundled DuckDB's list (${n} rows here)`);
  } else if (expected.get(name) !== n) {
    failures.push(`${kind} ${name}: ${n} rows, the bundled DuckDB counts ${expected.get(name)}`);
  }
}
for (const name of expected.keys()) {
  if (!seen.has(name)) failures.push(`${name}: missing (the bundled DuckDB counts ${expected.get(name)} rows)`);
}

conn.closeSync ? conn.closeSync() : conn.close?.();
instance.closeSync?.();

console.log('  ' + counts.join(' '));
if (failures.length > 0) {
  console.error(`FAIL with DuckDB ${version} (@duckdb/node-api ${pkgVersion}), ${failures.length} problem(s):`);
  for (const f of failures) console.error('  ' + f);
  process.exit(1);
}
console.log(`ok: DuckDB ${version} read all ${relations.length} tables/views of ${warehouse}; every row count matches`);
