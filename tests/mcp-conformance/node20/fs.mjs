// Node's `fs` as the conformance suite imports it, with the `globSync` that
// Node.js 20 lacks (register.mjs says why it is never called here).
import fs from 'node:fs';

export * from 'node:fs';
export default fs;

export function globSync() {
  throw new Error('fs.globSync needs Node.js 22 (tests/mcp-conformance/node20/register.mjs)');
}
