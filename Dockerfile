FROM node:24-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY src ./src
ENV NODE_ENV=production
EXPOSE 8080 8443 5684/udp
ENTRYPOINT ["node", "--disable-warning=ExperimentalWarning", "src/main.ts"]
CMD ["all"]
