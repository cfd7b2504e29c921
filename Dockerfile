FROM node:20.19-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci
COPY . .
RUN npm run build && npm prune --omit=dev
ENV PORT=3000
EXPOSE 3000
CMD ["node", "--max-semi-space-size=64", "dist/apps/ledger/src/main.js"]
