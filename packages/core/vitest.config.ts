import { defineConfig } from "vitest/config"

// the core is plain TypeScript: its tests are plain vitest and fast-check, no service, socket or Effect
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"]
  }
})
