// Lets the conformance suite (@modelcontextprotocol/conformance 0.1.16) start
// on Node.js 20, the build machine's node (scripts/mcp-servers.sh uses the
// machine's): its one bundled file imports `globSync` from `fs`, which
// Node.js 22 added, so on 20 the import fails before any scenario runs.
// Only its `tier-check` command calls it (a GitHub repository's assessment,
// never run here); the client scenarios never do. run.sh passes this with
// `node --import` when the node it runs has no fs.globSync, and not at all
// on 22 and later.
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
