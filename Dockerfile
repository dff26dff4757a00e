# the browser console, built with the dev dependencies (Vite, Preact) that the service itself does not need
FROM node:24-bookworm-slim AS console
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY console ./console
COPY scripts/build-console.mjs ./scripts/
RUN node scripts/build-console.mjs --force

FROM node:24-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY src ./src
COPY --from=console /app/dist/console ./dist/console
ENV NODE_ENV=production
EXPOSE 8080 8443 5684/udp
ENTRYPOINT ["node", "--disable-warning=ExperimentalWarning", "src/main.ts"]
CMD ["all"]
