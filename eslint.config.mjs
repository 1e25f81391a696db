// Lint and format in Effect's own style: typescript-eslint for correctness, @effect/dprint for layout.
import effect from "@effect/eslint-plugin"
import js from "@eslint/js"
import tseslint from "typescript-eslint"

export default tseslint.config(
  {
    ignores: [
      "dist/**",
      "node_modules/**",
      "sim-out/**",
      ".docs-check/**",
      ".docgen/**",
      ".tools/**",
      // each package's builds and extracted examples, its own node_modules
      "packages/*/node_modules/**",
      "packages/*/dist/**",
      "packages/*/.examples/**",
      "packages/*/.docs-check/**"
    ]
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["**/*.ts", "**/*.mjs"],
    plugins: { "@effect": effect },
    rules: {
      "@effect/dprint": ["error", {
        config: {
          indentWidth: 2,
          lineWidth: 120,
          semiColons: "asi",
          quoteStyle: "alwaysDouble",
          trailingCommas: "never",
          operatorPosition: "maintain",
          "arrowFunction.useParentheses": "force"
        }
      }],
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-namespace": "off",
      "@typescript-eslint/no-empty-object-type": "off",
      "no-restricted-globals": ["error", "setTimeout", "setInterval"]
    }
  },
  {
    // library code takes time only from Clock and randomness only from Random
    files: ["src/**/*.ts", "packages/*/src/**/*.ts"],
    rules: {
      "no-restricted-properties": ["error", { object: "Date", property: "now", message: "use Clock" }, {
        object: "Math",
        property: "random",
        message: "use Random"
      }, { object: "performance", property: "now", message: "use Clock" }]
    }
  },
  {
    files: ["**/*.mjs"],
    languageOptions: { globals: { console: "readonly", process: "readonly", URL: "readonly" } }
  },
  {
    files: [
      "bench/**/*.ts",
      "examples/**/*.ts",
      "test/**/*.ts",
      ".ci/**/*.mjs",
      "packages/*/test/**/*.ts",
      "packages/contract/suites/**/*.ts",
      "packages/*/bench/**/*.{ts,mjs}",
      "packages/*/scripts/**/*.mjs"
    ],
    rules: { "no-restricted-globals": "off" }
  }
)
