// A rate-limited server for the interop tests: express-rate-limit or
// @fastify/rate-limit, in one of their header modes, on 127.0.0.1.
//
//   node server.js MODE LIMIT WINDOW_MS
//
// It prints "listening 127.0.0.1:PORT" once it accepts requests, answers
// GET / with 200 under the limit and 429 above it, and exits when its
// standard input closes, so that a test that dies leaves no server behind.
'use strict';

const [mode, limitArg, windowArg] = process.argv.slice(2);
const limit = Number(limitArg);
const windowMs = Number(windowArg);
if (!mode || !(limit > 0) || !(windowMs > 0)) {
  console.error('usage: node server.js MODE LIMIT WINDOW_MS');
  process.exit(2);
}

process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
process.on('SIGTERM', () => process.exit(0));

const body = JSON.stringify({ ok: true });

function listening(server) {
  const a = server.address();
  console.log(`listening ${a.address}:${a.port}`);
}

const express = {
  'express-legacy': { legacyHeaders: true, standardHeaders: false },
  'express-draft6': { legacyHeaders: false, standardHeaders: 'draft-6' },
  'express-draft7': { legacyHeaders: false, standardHeaders: 'draft-7' },
  'express-draft8': { legacyHeaders: false, standardHeaders: 'draft-8' },
};

async function main() {
  if (express[mode]) {
    const app = require('express')();
    const { rateLimit } = require('express-rate-limit');
    app.use(rateLimit({ windowMs, limit, ...express[mode] }));
    app.get('/', (req, res) => res.type('application/json').send(body));
    const server = app.listen(0, '127.0.0.1', () => listening(server));
    return;
  }
  const drafts = { 'fastify-default': false, 'fastify-draft': true };
  if (!(mode in drafts)) {
    console.error(`unknown mode ${mode}`);
    process.exit(2);
  }
  const app = require('fastify')();
  await app.register(require('@fastify/rate-limit'), { max: limit, timeWindow: windowMs, enableDraftSpec: drafts[mode] });
  app.get('/', async (req, reply) => reply.type('application/json').send(body));
  await app.listen({ port: 0, host: '127.0.0.1' });
  listening(app.server);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
