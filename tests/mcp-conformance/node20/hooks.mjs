// Module hooks (register.mjs): the conformance suite's own `fs` import, and
// no other module's, is given fs.mjs, Node's `fs` plus a `globSync` that
// fails saying why.
const fsWithGlobSync = new URL('./fs.mjs', import.meta.url).href;

export async function resolve(specifier, context, next) {
  const fromSuite = context.parentURL?.includes('/node_modules/@modelcontextprotocol/conformance/');
  if (fromSuite && (specifier === 'fs' || specifier === 'node:fs')) {
    return { url: fsWithGlobSync, shortCircuit: true };
  }
  return next(specifier, context);
}
