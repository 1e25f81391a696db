import { readFileSync } from "node:fs"
import { availableParallelism } from "node:os"
import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

/**
 * The examples import the library as `effect-resilience/<Module>`, as a user would; tsconfig.json maps those
 * names to src/ for tsc and tsx, and this gives vitest the same map, so tests can import the examples. The same
 * map sends `@effect-resilience/core/<module>` to the core's sources (packages/core/src), as it does for tsc, and
 * `#edition` to this edition's adapter for the shared contract (test/edition/), and `#vectors` to the shared scenario
 * vectors' format (packages/contract/vectors/format.ts).
 */
const paths = (JSON.parse(readFileSync(new URL("./tsconfig.json", import.meta.url), "utf8")) as {
  compilerOptions: { paths: Record<string, [string]> }
}).compilerOptions.paths
const alias = Object.entries(paths)
  .sort(([a], [b]) => b.length - a.length)
  .map(([name, [target]]) => ({
    // `name/*` maps every subpath (the core's modules), `name` itself one file
    find: new RegExp(`^${name.replace(/[/.]/g, "\\$&").replace("*", "(.*)")}$`),
    replacement: fileURLToPath(new URL(target, import.meta.url)).replace("*", "$1")
  }))

/**
 * Integration tests are marked by their file name, `*.int.test.ts`: the files that need PostgreSQL or Redis,
 * start processes, or open sockets (real HTTP servers on 127.0.0.1). Every other test file is a unit test;
 * `test/support/unitGuard.ts` fails a unit test that opens a socket or starts a process, so a misnamed one is
 * caught.
 */
const integration = [
  "test/**/*.int.test.ts"
]

// `npm test` runs both projects, the unit tests first; `npm run test:unit` only the unit tests.
export default defineConfig({
  test: {
    poolOptions: {
      // the unit project's pool: pure in-memory tests share one module graph per worker (importing
      // Effect afresh for each file cost more than most files' tests), and run on every CPU
      threads: { isolate: false, maxThreads: availableParallelism() }
    },
    projects: [
      {
        // preserveSymlinks: test/contract is a link to packages/contract/suites, whose imports resolve from here
        resolve: { alias, preserveSymlinks: true },
        test: {
          name: "unit",
          include: ["test/**/*.test.ts"],
          exclude: integration,
          pool: "threads",
          setupFiles: ["test/support/unitGuard.ts"],
          sequence: { groupOrder: 0 },
          // TestClock time: a busy machine only makes these tests slower, so a cap a hang still hits
          // instead of vitest's 5 s
          testTimeout: 30_000
        }
      },
      {
        // preserveSymlinks: test/contract is a link to packages/contract/suites, whose imports resolve from here
        resolve: { alias, preserveSymlinks: true },
        test: {
          name: "integration",
          include: integration,
          // one file at a time, each in a fresh process (the default forks pool)
          pool: "forks",
          sequence: { groupOrder: 1 },
          // real services and processes on a machine that may be busy: caps a hang still hits
          testTimeout: 60_000,
          hookTimeout: 60_000
        }
      }
    ]
  }
})
