// Lets a plain `node` process (Node 22.18+, which strips TypeScript types itself) run this package's sources as
// they are: they import `./x.js` as tsc wants, and this hook answers with `./x.ts` where only that exists; and
// `effect-resilience` and its entry points (`effect-resilience/RateLimiterStore/Redis`) are this package's src/, and
// `@effect-resilience/core/<module>` the core's sources (packages/core/src), as tsconfig.json's paths map them for tsc. Used by the examples (`npm run serve`, `npm run demo`, ...) and by the
// processes the multi-process tests start (`node --import ./scripts/tsResolve.mjs script.ts`).
import { existsSync } from "node:fs"
import { register } from "node:module"
import { fileURLToPath } from "node:url"

// loaded once by --import, then again as the hooks module in the loader's own thread, which must not register
// itself: the flag tells it so. Its thread copies the environment as it starts (within register), so the flag is
// dropped after: the processes the program starts register their own hooks.
if (!process.env.TS_RESOLVE_REGISTERED) {
  process.env.TS_RESOLVE_REGISTERED = "1"
  register(import.meta.url)
  delete process.env.TS_RESOLVE_REGISTERED
}

const src = new URL("../src/", import.meta.url)
const core = new URL("../../core/src/", import.meta.url)

export const resolve = async (specifier, context, next) => {
  if (specifier === "effect-resilience" || specifier.startsWith("effect-resilience/")) {
    const entry = new URL(specifier === "effect-resilience" ? "index.ts" : `${specifier.slice(18)}.ts`, src)
    if (existsSync(fileURLToPath(entry))) return next(entry.href, context)
  }
  if (specifier.startsWith("@effect-resilience/core/")) {
    return next(new URL(`${specifier.slice(24)}.ts`, core).href, context)
  }
  if ((specifier.startsWith(".") || specifier.startsWith("/")) && specifier.endsWith(".js") && context.parentURL) {
    const url = new URL(specifier, context.parentURL)
    const ts = new URL(url.href.replace(/\.js$/, ".ts"))
    if (url.protocol === "file:" && !existsSync(fileURLToPath(url)) && existsSync(fileURLToPath(ts))) {
      return next(ts.href, context)
    }
  }
  return next(specifier, context)
}
