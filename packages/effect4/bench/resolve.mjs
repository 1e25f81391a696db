// Lets plain `node` (Node 22.18+ strips TypeScript types itself) run this folder as it is: its files import `./x.js`
// (and the root's `bench/x.js`) as tsc wants, and this hook answers with `x.ts` where only that exists. Unlike
// scripts/tsResolve.mjs (the examples), `effect-resilience/*` is left alone: it resolves through the package's own
// `exports` to the built `dist/`, what users run.
import { existsSync } from "node:fs"
import { register } from "node:module"
import { fileURLToPath } from "node:url"

if (!process.env.BENCH_RESOLVE_REGISTERED) {
  process.env.BENCH_RESOLVE_REGISTERED = "1"
  register(import.meta.url)
  delete process.env.BENCH_RESOLVE_REGISTERED
}

export const resolve = async (specifier, context, next) => {
  if ((specifier.startsWith(".") || specifier.startsWith("/")) && specifier.endsWith(".js") && context.parentURL) {
    const url = new URL(specifier, context.parentURL)
    const ts = new URL(url.href.replace(/\.js$/, ".ts"))
    if (url.protocol === "file:" && !existsSync(fileURLToPath(url)) && existsSync(fileURLToPath(ts))) {
      return next(ts.href, context)
    }
  }
  return next(specifier, context)
}
