{{/*
One `gharc webhook-server` Deployment with its Secret, ServiceAccount, Service, Ingress and
PodDisruptionBudget, for githubWebhookServer (scales HRAs) and actionsMetricsServer (exports
github_workflow_job* metrics only). Arguments: root, server (the values), metrics (metrics
or actionsMetrics values: port and proxy), suffix, key (the values' name, for messages) and
metricsOnly.
*/}}
{{- define "gharc-legacy.server" -}}
{{- $root := .root }}
{{- $s := .server }}
{{- $m := .metrics }}
{{- $name := include "gharc-legacy.serverFullname" . }}
{{- $ns := include "gharc-legacy.namespace" $root }}
{{- $watch := include "gharc-legacy.watchNamespace" $root }}
{{- $envNames := splitList "," (include "gharc-legacy.envNames" $s.env) }}
{{- if and (not $s.secret.enabled) (not (has "GITHUB_WEBHOOK_SECRET_TOKEN" $envNames)) }}
{{- fail (printf "%s.secret.enabled is false: gharc's webhook server refuses unsigned deliveries; set %s.secret.enabled=true with %s.secret.github_webhook_secret_token (or %s.secret.create=false and an existing Secret %s.secret.name with key github_webhook_secret_token), or give GITHUB_WEBHOOK_SECRET_TOKEN in %s.env" .key .key .key .key .key .key) }}
{{- end }}
{{- if and $s.secret.enabled $s.secret.create (not $s.secret.github_webhook_secret_token) }}
{{- fail (printf "%s.secret.create is true but %s.secret.github_webhook_secret_token is empty: set the webhook's secret (the one configured at GitHub)" .key .key) }}
{{- end }}
{{- if and $s.podDisruptionBudget.enabled $s.podDisruptionBudget.minAvailable $s.podDisruptionBudget.maxUnavailable }}
{{- fail (printf "%s.podDisruptionBudget: set only one of minAvailable and maxUnavailable" .key) }}
{{- end }}
{{- $labels := include "gharc-legacy.serverSelectorLabels" . }}
{{- if and $s.secret.enabled $s.secret.create }}
---
apiVersion: v1
kind: Secret
metadata:
  name: {{ $s.secret.name }}
  namespace: {{ $ns }}
  labels:
    {{- include "gharc-legacy.labels" $root | nindent 4 }}
type: Opaque
data:
  github_webhook_secret_token: {{ $s.secret.github_webhook_secret_token | toString | b64enc }}
  {{- range $k := list "github_token" "github_app_id" "github_app_installation_id" "github_app_private_key" }}
  {{- with (get $s.secret $k) }}
  {{ $k }}: {{ . | toString | b64enc }}
  {{- end }}
  {{- end }}
{{- end }}
{{- if $s.serviceAccount.create }}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "gharc-legacy.serverServiceAccountName" . }}
  namespace: {{ $ns }}
  labels:
    {{- include "gharc-legacy.labels" $root | nindent 4 }}
  {{- with $s.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
  labels:
    {{- /* The selector labels win over the chart's (one key, one value). */}}
    {{- merge ($labels | fromYaml) (include "gharc-legacy.labels" $root | fromYaml) | toYaml | nindent 4 }}
spec:
  replicas: {{ $s.replicaCount }}
  selector:
    matchLabels:
      {{- $labels | nindent 6 }}
  template:
    metadata:
      {{- with $s.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      labels:
        {{- $labels | nindent 8 }}
        {{- with $s.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      {{- with $s.imagePullSecrets | default $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      serviceAccountName: {{ include "gharc-legacy.serverServiceAccountName" . }}
      securityContext:
        {{- include "gharc-legacy.podSecurityContext" $s.podSecurityContext | nindent 8 }}
      {{- with $s.priorityClassName }}
      priorityClassName: {{ . | quote }}
      {{- end }}
      terminationGracePeriodSeconds: {{ $s.terminationGracePeriodSeconds | default 10 }}
      containers:
        - name: {{ .suffix }}
          image: {{ include "gharc-legacy.image" $root | quote }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command: ["gharc", "webhook-server"]
          args:
            - "--webhook-addr=:8000"
            - "--metrics-addr={{ include "gharc-legacy.metricsAddr" (dict "proxy" $m.proxy "port" $m.port) }}"
            {{- if .metricsOnly }}
            - "--workflow-job-metrics"
            - "--metrics-only"
            {{- with $s.maxSeries }}
            - "--workflow-job-metrics-max-series={{ . }}"
            {{- end }}
            {{- else }}
            {{- with $watch }}
            - "--watch-namespace={{ . }}"
            {{- end }}
            {{- with $s.queueLimit }}
            - "--queue-limit={{ . }}"
            {{- end }}
            {{- end }}
            {{- with $s.logLevel }}
            - "--log-level={{ . }}"
            {{- end }}
            {{- with $s.logFormat }}
            - "--log-format={{ . }}"
            {{- end }}
          ports:
            - name: http
              containerPort: 8000
              protocol: TCP
            {{- if not $m.proxy.enabled }}
            - name: metrics-port
              containerPort: {{ $m.port }}
              protocol: TCP
            {{- end }}
          # Any GET is answered "webhook server is running" once the server listens.
          readinessProbe:
            httpGet:
              path: /
              port: http
            periodSeconds: 10
          livenessProbe:
            httpGet:
              path: /
              port: http
            initialDelaySeconds: 15
            periodSeconds: 20
          env:
            {{- if $s.secret.enabled }}
            - name: GITHUB_WEBHOOK_SECRET_TOKEN
              valueFrom:
                secretKeyRef:
                  name: {{ $s.secret.name }}
                  key: github_webhook_secret_token
            {{- end }}
            {{- if $s.useRunnerGroupsVisibility }}
            {{- with $root.Values.githubEnterpriseServerURL }}
            - name: GITHUB_ENTERPRISE_URL
              value: {{ . | quote }}
            {{- end }}
            {{- with $root.Values.githubURL }}
            - name: GITHUB_URL
              value: {{ . | quote }}
            {{- end }}
            {{- include "gharc-legacy.githubEnv" (dict "name" (ternary $s.secret.name $root.Values.authSecret.name (and $s.secret.enabled (or $s.secret.github_token $s.secret.github_app_id (not $s.secret.create))))) | trim | nindent 12 }}
            {{- end }}
            {{- include "gharc-legacy.env" $s.env | trim | nindent 12 }}
            {{- with .extraEnv }}
            {{- include "gharc-legacy.env" . | trim | nindent 12 }}
            {{- end }}
          {{- with $s.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with $s.lifecycle }}
          lifecycle:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          securityContext:
            {{- include "gharc-legacy.securityContext" $s.securityContext | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
        {{- if $m.proxy.enabled }}
        {{- include "gharc-legacy.metricsProxy" (dict "proxy" $m.proxy "port" $m.port) | nindent 8 }}
        {{- end }}
      volumes:
        - name: tmp
          emptyDir: {}
      {{- with $s.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $s.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $s.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
  labels:
    {{- include "gharc-legacy.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .suffix }}
  {{- with $s.service.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ $s.service.type }}
  selector:
    {{- $labels | nindent 4 }}
  ports:
    {{- toYaml $s.service.ports | nindent 4 }}
    - name: metrics-port
      port: {{ $m.port }}
      targetPort: metrics-port
      protocol: TCP
  {{- with $s.service.loadBalancerSourceRanges }}
  loadBalancerSourceRanges:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- if $s.ingress.enabled }}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
  labels:
    {{- include "gharc-legacy.labels" $root | nindent 4 }}
  {{- with $s.ingress.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  {{- with $s.ingress.ingressClassName }}
  ingressClassName: {{ . }}
  {{- end }}
  {{- with $s.ingress.tls }}
  tls:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  rules:
    {{- range $s.ingress.hosts }}
    - host: {{ .host | quote }}
      http:
        paths:
          {{- with .extraPaths }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
          {{- range .paths }}
          - path: {{ .path }}
            pathType: {{ .pathType | default "ImplementationSpecific" }}
            backend:
              service:
                name: {{ $name }}
                port:
                  number: {{ (first $s.service.ports).port }}
          {{- end }}
    {{- end }}
{{- end }}
{{- if $s.podDisruptionBudget.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
  labels:
    {{- include "gharc-legacy.labels" $root | nindent 4 }}
spec:
  {{- if $s.podDisruptionBudget.maxUnavailable }}
  maxUnavailable: {{ $s.podDisruptionBudget.maxUnavailable }}
  {{- else }}
  minAvailable: {{ $s.podDisruptionBudget.minAvailable | default 1 }}
  {{- end }}
  selector:
    matchLabels:
      {{- $labels | nindent 6 }}
{{- end }}
{{- end }}
